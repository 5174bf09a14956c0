import { Command } from 'commander';
import { contextOf } from './context';

/** `kl projections rebuild`: empty the read models and replay the log, on the server. */
export function registerProjectionsCommand(program: Command): void {
  program
    .command('projections')
    .description('manage read-model projections')
    .command('rebuild')
    .description('empty every read model and replay the event log into it')
    .action(async (_options: unknown, command: Command) => {
      const { client, print } = contextOf(command);
      const projectors = await client.rebuildProjections();
      print({
        columns: ['projector', 'events'],
        rows: projectors.map((p) => [p.projector, p.events]),
      });
    });
}
