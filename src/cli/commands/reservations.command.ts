import { Command } from 'commander';
import { ago, formatDuration } from '../durations';
import { contextOf } from './context';

/**
 * `kl reservations [state]`: who holds which addresses now, apply runs'
 * reservations and terraform locks (a `*` reservation, read for a plan).
 */
export function registerReservationsCommand(program: Command): void {
  program
    .command('reservations')
    .description('list the reservations held now: kl apply runs and terraform locks')
    .argument('[state]', 'only this state')
    .action(async (state: string | undefined, _options: unknown, command: Command) => {
      const { client, print } = contextOf(command);
      const held = await client.reservations(state);
      const now = Date.now();
      print({
        columns: [
          'state',
          'glob',
          'mode',
          'kind',
          'actor',
          'run_id',
          'lock_id',
          'acquired_at',
          'age',
          'expires_at',
          'expires_in',
        ],
        rows: held.map((r) => [
          r.state,
          r.glob,
          r.mode,
          r.kind,
          r.actor,
          r.run_id,
          r.kind === 'apply' ? null : r.id,
          r.acquired_at,
          ago(r.acquired_at, now),
          r.expires_at,
          r.expires_at === null ? null : formatDuration(Date.parse(r.expires_at) - now),
        ]),
      });
    });
}
