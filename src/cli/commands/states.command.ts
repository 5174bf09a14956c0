import { Command } from 'commander';
import { contextOf } from './context';

/** `kl states`: every live state, its current version, who holds its lock, whether it is over its quota. */
export function registerStatesCommand(program: Command): void {
  program
    .command('states')
    .description('list states with their current version, size and lock')
    .action(async (_options: unknown, command: Command) => {
      const { client, print } = contextOf(command);
      const states = await client.states();
      print({
        columns: [
          'name',
          'version',
          'serial',
          'resources',
          'instances',
          'terraform_version',
          'updated_at',
          'locked_by',
          'over_quota',
        ],
        rows: states.map((s) => [
          s.name,
          s.version,
          s.serial,
          s.resourceCount,
          s.instanceCount,
          s.terraformVersion,
          s.updatedAt,
          s.lock ? (s.lock.who ?? s.lock.id) : null,
          s.quotaOverrun
            ? `${s.quotaOverrun.level}: ${s.quotaOverrun.count} > ${s.quotaOverrun.limit}`
            : null,
        ]),
      });
    });
}
