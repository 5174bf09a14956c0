import { Command } from 'commander';
import { contextOf } from './context';

/** `kl projections rebuild`: rebuild the read models from the log, on the server. */
export function registerProjectionsCommand(program: Command): void {
  program
    .command('projections')
    .description('manage read-model projections')
    .command('rebuild')
    .description('replay the event log into fresh read models and swap them in')
    .action(async (_options: unknown, command: Command) => {
      const { client, print } = contextOf(command);
      const projectors = await client.rebuildProjections();
      print({
        columns: ['projector', 'events'],
        rows: projectors.map((p) => [p.projector, p.events]),
      });
    });
}
