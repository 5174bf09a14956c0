import { Command } from 'commander';
import { packageVersion } from '../../infrastructure/package-root';
import { renderJson } from '../render';
import { visible } from '../terminal-text';
import { contextOf } from './context';

/**
 * `kl version`: kl's version and the version of the kld it talks to. An
 * unreachable server is an error (exit 1) after kl's own version is printed;
 * `--client` asks for kl's alone.
 */
export function registerVersionCommand(program: Command, klVersion = packageVersion()): void {
  program
    .command('version')
    .description('print the kl version and the server (kld) version')
    .option('--client', 'only the kl version; do not ask the server')
    .action(async (options: { client?: boolean }, command: Command) => {
      const { client, format, print } = contextOf(command);
      let kld: string | null = null;
      let failure: unknown = null;
      if (!options.client) {
        try {
          kld = (await client.serverVersion()).version;
        } catch (err) {
          failure = err;
        }
      }
      if (format === 'json') {
        process.stdout.write(renderJson({ kl: klVersion, ...(options.client ? {} : { kld }) }));
      } else if (format === 'csv') {
        print({
          columns: ['component', 'version'],
          rows: [['kl', klVersion], ...(options.client ? [] : [['kld', kld]])],
        });
      } else {
        process.stdout.write(
          `kl ${klVersion}\n${options.client ? '' : `kld ${visible(kld ?? '(unreachable)')}\n`}`,
        );
      }
      if (failure !== null) throw failure;
    });
}
