import type { RecordedEvent } from '../../domain/shared/event';
import { ReservationAcquired, StateEventType } from '../../domain/state';
import type { Queryable } from '../../infrastructure/postgres/database';
import { jsonbText, textParam } from '../../infrastructure/postgres/jsonb-text';
import { prepared } from '../../infrastructure/postgres/prepared-statement';
import { Projector } from '../projector';
import { asStateEvent } from './state-event';

const STREAM_PREFIX = 'state-';

/**
 * `resource_reservations` (a view, migration 038): apply runs' reservations,
 * and terraform locks as the `*` reservations they are, so one view answers
 * "who holds what". Its rows are `reservation_holders`; an apply run's info
 * is stored once, in `reservation_run_info`, while the run holds anything
 * (a run may hold thousands of globs). The state's name is its stream's
 * (`state-<name>`), so this projector reads no other's tables. Idempotent:
 * inserts ignore a row already there, renewals set a value, releases delete.
 */
@Projector()
export class ReservationsProjector implements Projector {
  readonly name = 'resource-reservations';
  readonly handles = [
    StateEventType.LockAcquired,
    StateEventType.LockReleased,
    StateEventType.ReservationAcquired,
    StateEventType.ReservationRenewed,
    StateEventType.ReservationReleased,
    StateEventType.ReservationExpired,
    StateEventType.StateDeleted,
  ];
  readonly tables = ['reservation_holders', 'reservation_run_info'];

  async apply(events: RecordedEvent[], tx: Queryable): Promise<void> {
    // A run's reservations come together (one event per glob, thousands for a
    // big state-engine write): each row by itself would be a round trip.
    const acquired: { name: string; data: ReservationAcquired['data'] }[] = [];
    for (const recorded of events) {
      const event = asStateEvent(recorded);
      if (event === null) continue;
      const name = recorded.streamId.slice(STREAM_PREFIX.length);
      if (event.type === 'ReservationAcquired') {
        acquired.push({ name, data: event.data });
        continue;
      }
      await insertAcquired(acquired.splice(0), tx);
      const at = recorded.metadata.occurredAt;
      switch (event.type) {
        case 'LockAcquired': {
          const { stateId, lockId, info } = event.data;
          // Events from before plans shared carry no mode: every lock was exclusive.
          const mode = event.data.mode ?? 'write';
          await tx.query(
            prepared(
              `INSERT INTO reservation_holders (state_id, state_name, id, kind, run_id,
               address_glob, mode, holder, info, acquired_at, expires_at)
             VALUES ($1, $2, $3, $4, NULL, '*', $5, $6, $7, $8, NULL)
             ON CONFLICT (state_id, kind, id) DO NOTHING`,
              [
                stateId,
                textParam(name),
                textParam(lockId),
                mode === 'read' ? 'terraform-plan' : 'terraform-lock',
                mode,
                textParam(typeof info.Who === 'string' ? info.Who : recorded.metadata.actor),
                jsonbText(info),
                event.data.acquiredAt ?? at,
              ],
            ),
          );
          break;
        }
        case 'LockReleased':
          await tx.query(
            prepared(
              `DELETE FROM reservation_holders
                WHERE state_id = $1 AND id = $2 AND kind <> 'apply'`,
              [event.data.stateId, textParam(event.data.lockId)],
            ),
          );
          break;
        case 'ReservationRenewed':
          await tx.query(
            `UPDATE reservation_holders SET expires_at = $3
              WHERE state_id = $1 AND kind = 'apply' AND id = ANY($2::text[])`,
            [event.data.stateId, event.data.reservationIds.map(textParam), event.data.expiresAt],
          );
          break;
        case 'ReservationReleased':
        case 'ReservationExpired': {
          const { stateId, runId, reservationIds } = event.data;
          await tx.query(
            `DELETE FROM reservation_holders
              WHERE state_id = $1 AND kind = 'apply' AND id = ANY($2::text[])`,
            [stateId, reservationIds.map(textParam)],
          );
          // The info goes with the run's last reservation.
          await tx.query(
            prepared(
              `DELETE FROM reservation_run_info i
                WHERE i.state_id = $1 AND i.run_id = $2
                  AND NOT EXISTS (SELECT 1 FROM reservation_holders h
                                   WHERE h.state_id = $1 AND h.kind = 'apply' AND h.run_id = $2)`,
              [stateId, textParam(runId)],
            ),
          );
          break;
        }
        case 'StateDeleted':
          await tx.query('DELETE FROM reservation_holders WHERE state_id = $1', [
            event.data.stateId,
          ]);
          await tx.query('DELETE FROM reservation_run_info WHERE state_id = $1', [
            event.data.stateId,
          ]);
          break;
        default:
          break;
      }
    }
    await insertAcquired(acquired, tx);
  }
}

/**
 * Rows per statement of insertAcquired. node-postgres encodes a statement's
 * array parameters in one turn of kld's event loop: a run of 10,000 globs in
 * one statement held it about 100 ms (wave 22); a statement per 1,000 rows
 * lets other requests run between them, at a round trip each.
 */
const ACQUIRED_ROWS_PER_STATEMENT = 1000;

async function insertAcquired(
  acquired: { name: string; data: ReservationAcquired['data'] }[],
  tx: Queryable,
): Promise<void> {
  for (let at = 0; at < acquired.length; at += ACQUIRED_ROWS_PER_STATEMENT) {
    await insertAcquiredRows(acquired.slice(at, at + ACQUIRED_ROWS_PER_STATEMENT), tx);
  }
}

/**
 * The rows of ReservationAcquired events, in their order. A run's info is on
 * its first reservation (on each before wave 19): its first row wins.
 */
async function insertAcquiredRows(
  acquired: { name: string; data: ReservationAcquired['data'] }[],
  tx: Queryable,
): Promise<void> {
  if (acquired.length === 0) return;
  const withInfo = acquired.filter((a) => a.data.info !== undefined);
  if (withInfo.length > 0) {
    await tx.query(
      `INSERT INTO reservation_run_info (state_id, run_id, info)
       SELECT * FROM unnest($1::uuid[], $2::text[], $3::jsonb[])
       ON CONFLICT (state_id, run_id) DO NOTHING`,
      [
        withInfo.map((a) => a.data.stateId),
        withInfo.map((a) => textParam(a.data.runId)),
        withInfo.map((a) => jsonbText(a.data.info)),
      ],
    );
  }
  const column = <T>(f: (d: ReservationAcquired['data']) => T) => acquired.map((a) => f(a.data));
  await tx.query(
    `INSERT INTO reservation_holders (state_id, state_name, id, kind, run_id, address_glob,
       mode, holder, info, acquired_at, expires_at)
     SELECT r.state_id, r.state_name, r.id, 'apply', r.run_id, r.address_glob, r.mode, r.holder,
            NULL, r.acquired_at, r.expires_at
       FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                   $7::text[], $8::timestamptz[], $9::timestamptz[])
            AS r(state_id, state_name, id, run_id, address_glob, mode, holder, acquired_at,
                 expires_at)
     ON CONFLICT (state_id, kind, id) DO NOTHING`,
    [
      column((d) => d.stateId),
      acquired.map((a) => textParam(a.name)),
      column((d) => textParam(d.reservationId)),
      column((d) => textParam(d.runId)),
      column((d) => textParam(d.glob)),
      column((d) => d.mode),
      column((d) => textParam(d.holder)),
      column((d) => d.acquiredAt),
      column((d) => d.expiresAt),
    ],
  );
}
