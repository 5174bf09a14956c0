import { Command } from 'commander';
import { contextOf } from './context';

/** `kl force-unlock <state>`: releases whoever holds the lock, like `terraform force-unlock`. */
export function registerForceUnlockCommand(program: Command): void {
  program
    .command('force-unlock')
    .description('release the lock on a state, whoever holds it')
    .argument('<state>', 'state name')
    .action(async (state: string, _options: unknown, command: Command) => {
      const { client, print } = contextOf(command);
      // Read the holder first only to say what was released; the unlock
      // itself is unconditional.
      const held = (await client.locks()).find((l) => l.name === state);
      await client.forceUnlock(state);
      print({
        columns: ['state', 'released_lock_id', 'held_by'],
        rows: [[state, held?.lockId ?? null, held ? (held.who ?? held.acquiredBy) : null]],
      });
    });
}
