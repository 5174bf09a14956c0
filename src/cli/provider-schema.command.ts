import { Command } from 'commander';
import { ProviderSchemaCache } from '../application/ports/provider-schema-cache.port';
import { InMemoryProviderSchemaCache } from '../infrastructure/provider/in-memory-provider-schema-cache';
import { CachedSchemaProviderFactory } from '../infrastructure/provider/provider-factory';

interface ProviderSchemaOptions {
  version?: string;
  providerSearchPath?: string[];
}

/** `kl provider schema <source>`: the resource types a provider offers and their schema versions. */
export function registerProviderSchemaCommand(
  program: Command,
  cache: ProviderSchemaCache = new InMemoryProviderSchemaCache(),
): void {
  const provider =
    program.commands.find((c) => c.name() === 'provider') ??
    program.command('provider').description('inspect Terraform provider plugins');
  provider
    .command('schema <source>')
    .description('list resource types and their schema versions (e.g. hashicorp/aws)')
    .option(
      '--version <version>',
      'exact provider version (default: lock file pin, else highest found)',
    )
    .option(
      '--provider-search-path <path...>',
      'directories laid out <host>/<namespace>/<type>/<version>/<os>_<arch>/, searched first',
    )
    .action(async (source: string, options: ProviderSchemaOptions) => {
      try {
        const { schema } = await new CachedSchemaProviderFactory(cache).schema(source, {
          version: options.version,
          searchPaths: options.providerSearchPath ?? [],
        });
        process.stdout.write(
          renderTable(
            ['TYPE', 'VERSION'],
            Object.entries(schema.resourceSchemas).map(([type, s]) => [type, String(s.version)]),
          ),
        );
      } catch (e) {
        const message = e instanceof Error ? e.message : String(e);
        process.stderr.write(`error: ${message.split('\n').find((l) => l.trim()) ?? 'failed'}\n`);
        process.exitCode = 1;
      }
    });
}

function renderTable(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]): string =>
    cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]))).join('  ') + '\n';
  return [header, ...rows].map(line).join('');
}
