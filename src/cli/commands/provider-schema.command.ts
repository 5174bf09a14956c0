import { Command } from 'commander';
import type { ProviderSchemaCache } from '../../application/ports/provider-schema-cache.port';
import { render, Format } from '../render';

interface ProviderSchemaOptions {
  version?: string;
  providerSearchPath?: string[];
}

interface Globals {
  server?: string;
  token?: string;
  format?: Format;
}

/**
 * `kl provider schema <source>`: the resource types a provider offers and
 * their schema versions. Schemas come from this machine's cache, else
 * kld's, when they have them (the AWS one costs seconds to fetch); the
 * provider is only launched on a miss.
 */
export function registerProviderSchemaCommand(
  program: Command,
  cacheFor: (globals: Globals) => Promise<ProviderSchemaCache> = restCache,
): void {
  const provider =
    program.commands.find((c) => c.name() === 'provider') ??
    program.command('provider').description('configure and inspect Terraform provider plugins');
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
    .action(async (source: string, options: ProviderSchemaOptions, command: Command) => {
      const globals = command.optsWithGlobals<Globals>();
      // Loaded here, not at start-up: gRPC and protobuf cost every other kl command time.
      const { CachedSchemaProviderFactory } =
        await import('../../infrastructure/provider/provider-factory');
      const { schema } = await new CachedSchemaProviderFactory(await cacheFor(globals)).schema(
        source,
        { version: options.version, searchPaths: options.providerSearchPath ?? [] },
      );
      const rows = Object.entries(schema.resourceSchemas)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([type, s]) => [type, s.version]);
      process.stdout.write(
        render({ columns: ['type', 'schema_version'], rows }, globals.format ?? 'table'),
      );
    });
}

async function restCache(globals: Globals): Promise<ProviderSchemaCache> {
  const { KldHttpClient } = await import('../../infrastructure/rest/kld-http-client');
  const { RestProviderSchemaCache } =
    await import('../../infrastructure/provider/rest-provider-schema-cache');
  const { FileProviderSchemaCache, TieredProviderSchemaCache } =
    await import('../../infrastructure/provider/file-provider-schema-cache');
  const http = new KldHttpClient(globals.server ?? 'http://127.0.0.1:8080', {
    token: globals.token,
  });
  return new TieredProviderSchemaCache([
    new FileProviderSchemaCache(),
    new RestProviderSchemaCache(http),
  ]);
}
