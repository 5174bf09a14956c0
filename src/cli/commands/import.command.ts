import { SingleBar } from 'cli-progress';
import { Command } from 'commander';
import * as fs from 'node:fs';
import { DomainError } from '../../domain/shared/domain-error';
import { parseStateDocument } from '../../domain/terraform';
import { KlError } from '../cli-error';
import { contextOf, usage } from './context';

const CHUNK = 256 * 1024;

/**
 * `kl import <file> --name <state>`: a new version of <state> from a
 * .tfstate file, recorded with source `import`. The file is validated here
 * first so a bad file fails fast with the same message the server would give.
 */
export function registerImportCommand(program: Command): void {
  program
    .command('import')
    .description('import a .tfstate file as a new version of a state')
    .argument('<file>', 'terraform state file (v4)')
    .requiredOption('--name <state>', 'state to import into (created if missing)')
    .option(
      '--force',
      'import even if the file has another lineage or an older serial than the current version',
    )
    .action(async (file: string, options: { name: string; force?: boolean }, command: Command) => {
      if (!fs.existsSync(file)) usage(command, `no such file: ${file}`);
      const bytes = fs.readFileSync(file);
      let instances: number;
      try {
        // From the text, like the server: numbers beyond double precision stay exact.
        instances = parseStateDocument(bytes.toString('utf8')).resources.reduce(
          (n, r) => n + r.instances.length,
          0,
        );
      } catch (err) {
        const why = err instanceof DomainError ? err.message : String(err);
        throw new KlError('STATE.INVALID', `${file} is not a valid terraform state: ${why}`);
      }
      const { client, print } = contextOf(command);
      const bar = process.stderr.isTTY
        ? new SingleBar({
            stream: process.stderr,
            format: 'uploading {bar} {percentage}% {value}/{total} bytes',
          })
        : null;
      bar?.start(bytes.length, 0);
      try {
        const { version } = await client.importState(
          options.name,
          bar ? streamed(bytes, bar) : bytes,
          options.force === true,
        );
        bar?.stop();
        print({
          columns: ['state', 'version', 'instances', 'file'],
          rows: [[options.name, version, instances, file]],
        });
      } finally {
        bar?.stop();
      }
    });
}

/** The body in chunks, advancing the bar as the connection takes them. */
async function* streamed(bytes: Buffer, bar: SingleBar): AsyncGenerator<Uint8Array> {
  for (let offset = 0; offset < bytes.length; offset += CHUNK) {
    const chunk = bytes.subarray(offset, offset + CHUNK);
    bar.update(offset + chunk.length);
    yield chunk;
  }
}
