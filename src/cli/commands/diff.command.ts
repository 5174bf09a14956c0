import { Command } from 'commander';
import { contextOf, integerOption, usage } from './context';

/** `kl diff <state> --from N [--to M]`: what changed between two serials. */
export function registerDiffCommand(program: Command): void {
  program
    .command('diff')
    .description('instances added, removed and changed between two serials')
    .argument('<state>', 'state name')
    .option('--from <serial>', 'the older serial (required)')
    .option('--to <serial>', 'the newer serial (default: current)')
    .action(async (state: string, options: { from?: string; to?: string }, command: Command) => {
      const from = integerOption(command, options.from, '--from');
      if (from === undefined) usage(command, "required option '--from <serial>' not specified");
      const to = integerOption(command, options.to, '--to');
      const { client, print } = contextOf(command);
      const diff = await client.diff(state, from, to);
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
