import { Command } from 'commander';
import { contextOf } from './context';

/** `kl history <state>`: every accepted write, oldest first. */
export function registerHistoryCommand(program: Command): void {
  program
    .command('history')
    .description('list every version of a state, oldest first')
    .argument('<state>', 'state name')
    .action(async (state: string, _options: unknown, command: Command) => {
      const { client, print } = contextOf(command);
      const versions = await client.history(state);
      print({
        columns: [
          'version',
          'serial',
          'source',
          'actor',
          'terraform_version',
          'resources',
          'instances',
          'created_at',
        ],
        rows: versions.map((v) => [
          v.version,
          v.serial,
          v.source,
          v.actor,
          v.terraformVersion,
          v.resourceCount,
          v.instanceCount,
          v.createdAt,
        ]),
      });
    });
}
