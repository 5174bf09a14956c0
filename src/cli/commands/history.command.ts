import { Command } from 'commander';
import { contextOf } from './context';
import { visible } from '../terminal-text';

/**
 * `kl history <state>`: every accepted write, oldest first, with the lineage
 * each one replaced when it changed it. A deleted state still has its
 * history; stderr says it was deleted.
 */
export function registerHistoryCommand(program: Command): void {
  program
    .command('history')
    .description('list every version of a state, oldest first (also of a deleted state)')
    .argument('<state>', 'state name')
    .action(async (state: string, _options: unknown, command: Command) => {
      const { client, print } = contextOf(command);
      const history = await client.history(state);
      print({
        columns: [
          'version',
          'serial',
          'lineage',
          'lineage_changed_from',
          'source',
          'actor',
          'terraform_version',
          'resources',
          'instances',
          'created_at',
        ],
        rows: history.versions.map((v) => [
          v.version,
          v.serial,
          v.lineage,
          v.lineageChangedFrom,
          v.source,
          v.actor,
          v.terraformVersion,
          v.resourceCount,
          v.instanceCount,
          v.createdAt,
        ]),
      });
      if (history.deletedAt !== null) {
        process.stderr.write(
          `kl: state "${visible(state)}" was deleted at ${visible(String(history.deletedAt))}\n`,
        );
      }
    });
}
