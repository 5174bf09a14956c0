import { Command } from 'commander';
import { contextOf, selectedVersion, usage } from './context';

interface DiffOptions {
  from?: string;
  to?: string;
  fromVersion?: string;
  toVersion?: string;
}

/**
 * `kl diff <state>`: what changed between two versions, named by our version
 * number (`--from-version`, `--to-version`) or by terraform serial (`--from`,
 * `--to`: the newest version carrying it; serials repeat after a forced push).
 */
export function registerDiffCommand(program: Command): void {
  program
    .command('diff')
    .description('instances added, removed and changed between two versions')
    .argument('<state>', 'state name')
    .option('--from <serial>', 'the older version, by terraform serial')
    .option('--to <serial>', 'the newer version, by terraform serial (default: current)')
    .option('--from-version <n>', 'the older version, by our version number')
    .option('--to-version <n>', 'the newer version, by our version number (default: current)')
    .action(async (state: string, options: DiffOptions, command: Command) => {
      const { client, print } = contextOf(command);
      const from = await selectedVersion(
        command,
        client,
        state,
        { serial: options.from, version: options.fromVersion },
        { serial: '--from', version: '--from-version' },
      );
      if (from === undefined) {
        usage(command, 'give the older version: --from <serial> or --from-version <n>');
      }
      const to = await selectedVersion(
        command,
        client,
        state,
        { serial: options.to, version: options.toVersion },
        { serial: '--to', version: '--to-version' },
      );
      const diff = await client.diff(
        state,
        { version: from },
        to === undefined ? undefined : { version: to },
      );
      print({
        columns: ['change', 'address', 'paths'],
        rows: [
          ...diff.added.map((a) => ['added', a, []]),
          ...diff.removed.map((a) => ['removed', a, []]),
          ...diff.changed.map((c) => [
            'changed',
            c.address,
            [...c.attributes, ...c.members.map((m) => `(${m})`)],
          ]),
        ],
      });
    });
}
