import { Command } from 'commander';
import { contextOf } from './context';

/** `kl locks`: every terraform lock held now (a plan's are shared: mode read). */
export function registerLocksCommand(program: Command): void {
  program
    .command('locks')
    .description('list the locks held now')
    .action(async (_options: unknown, command: Command) => {
      const { client, print } = contextOf(command);
      const locks = await client.locks();
      print({
        columns: ['state', 'lock_id', 'mode', 'who', 'operation', 'acquired_at', 'acquired_by'],
        rows: locks.map((l) => [
          l.name,
          l.lockId,
          l.mode,
          l.who,
          l.operation,
          l.acquiredAt,
          l.acquiredBy,
        ]),
      });
    });
}
