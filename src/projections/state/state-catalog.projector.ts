import type { RecordedEvent } from '../../domain/shared/event';
import { StateEventType } from '../../domain/state';
import type { Queryable } from '../../infrastructure/postgres/database';
import { Projector } from '../projector';
import { jsonbText, textParam } from '../../infrastructure/postgres/jsonb-text';
import { prepared } from '../../infrastructure/postgres/prepared-statement';
import { asStateEvent } from './state-event';

/**
 * `states`, `state_versions` and `state_locks` (a row per terraform lock: a
 * plan's locks are shared): one statement per event (two for a deletion),
 * each guarded so that applying an event a second time changes nothing (versions
 * only move forward, inserts ignore conflicts, deletes match the lock id).
 */
/** The catalog's projector, by name (its checkpoint's). */
export const STATE_CATALOG_PROJECTOR = 'state-catalog';

@Projector()
export class StateCatalogProjector implements Projector {
  readonly name = STATE_CATALOG_PROJECTOR;
  readonly handles = [
    StateEventType.StateCreated,
    StateEventType.LockAcquired,
    StateEventType.LockReleased,
    StateEventType.ApplyCommitted,
    StateEventType.StateDeleted,
  ];
  readonly tables = ['states', 'state_versions', 'state_locks'];

  async apply(events: RecordedEvent[], tx: Queryable): Promise<void> {
    for (const recorded of events) {
      const event = asStateEvent(recorded);
      if (event === null) continue;
      const at = recorded.metadata.occurredAt;
      switch (event.type) {
        case 'StateCreated':
          await tx.query(
            `INSERT INTO states (state_id, name, created_at, updated_at) VALUES ($1, $2, $3, $3)
             ON CONFLICT (state_id) DO NOTHING`,
            [event.data.stateId, event.data.name, at],
          );
          break;
        case 'ApplyCommitted': {
          const d = event.data;
          // The version and the state's row in one statement (one round
          // trip): each part is guarded as it was alone.
          await tx.query(
            prepared(
              `WITH version AS (
               INSERT INTO state_versions (state_id, version, serial, lineage, source, actor,
                 terraform_version, instance_count, resource_count, checksum, outputs,
                 check_results, extra, created_at, lineage_changed_from, run_id)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
               ON CONFLICT (state_id, version) DO NOTHING
             )
             UPDATE states SET current_version = $2, current_serial = $3, lineage = $4,
                    terraform_version = $7, instance_count = $8, resource_count = $9,
                    updated_at = $14
              WHERE state_id = $1 AND current_version < $2`,
              [
                d.stateId,
                d.version,
                d.serial,
                textParam(d.lineage),
                d.source,
                textParam(recorded.metadata.actor),
                textParam(d.terraformVersion),
                d.instanceCount,
                d.resourceCount,
                d.checksum,
                JSON.stringify(d.outputs),
                d.checkResults === null ? null : JSON.stringify(d.checkResults),
                Object.keys(d.extra).length === 0 ? null : JSON.stringify(d.extra),
                at,
                textParam(d.lineageChanged?.from ?? null),
                textParam(d.runId ?? null),
              ],
            ),
          );
          break;
        }
        case 'LockAcquired': {
          const { stateId, lockId, info, mode } = event.data;
          await tx.query(
            prepared(
              `INSERT INTO state_locks (state_id, name, lock_id, operation, who, info, acquired_at,
               acquired_by, mode)
             SELECT s.state_id, s.name, $2, $3, $4, $5, $6, $7, $8 FROM states s
              WHERE s.state_id = $1
             ON CONFLICT (state_id, lock_id) DO NOTHING`,
              [
                stateId,
                textParam(lockId),
                textParam(info.Operation ?? null),
                textParam(info.Who ?? null),
                jsonbText(info),
                at,
                textParam(recorded.metadata.actor),
                mode ?? 'write',
              ],
            ),
          );
          break;
        }
        case 'LockReleased':
          await tx.query(
            prepared('DELETE FROM state_locks WHERE state_id = $1 AND lock_id = $2', [
              event.data.stateId,
              textParam(event.data.lockId),
            ]),
          );
          break;
        case 'StateDeleted':
          await tx.query(
            `UPDATE states SET deleted_at = $2, updated_at = $2
              WHERE state_id = $1 AND deleted_at IS NULL`,
            [event.data.stateId, at],
          );
          await tx.query('DELETE FROM state_locks WHERE state_id = $1', [event.data.stateId]);
          break;
        default:
          break; // lifecycles belong to other projectors
      }
    }
  }
}
