import { QUOTA_EVENT_TYPES, QuotaEvent } from '../../domain/quota';
import type { RecordedEvent } from '../../domain/shared/event';
import type { QuotaExceeded } from '../../domain/state';
import type { Queryable } from '../../infrastructure/postgres/database';
import { textParam } from '../../infrastructure/postgres/jsonb-text';
import { Projector } from '../projector';

const HANDLES: readonly string[] = [...QUOTA_EVENT_TYPES, 'QuotaExceeded'];

/**
 * `quotas` (one row per glob with a quota) and `quota_overruns` (one row
 * per version committed over a limit), which `kl quota` reads.
 */
@Projector()
export class QuotasProjector implements Projector {
  readonly name = 'quotas';
  readonly handles = HANDLES;
  readonly tables = ['quotas', 'quota_overruns'];

  async apply(events: RecordedEvent[], tx: Queryable): Promise<void> {
    for (const recorded of events) {
      if (!HANDLES.includes(recorded.type)) continue;
      const event = recorded as unknown as QuotaEvent | QuotaExceeded;
      const { occurredAt, actor } = recorded.metadata;
      switch (event.type) {
        case 'QuotaSet': {
          const d = event.data;
          await tx.query(
            `INSERT INTO quotas (glob, max_resources, soft_resources, set_at, set_by)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (glob) DO UPDATE SET max_resources = EXCLUDED.max_resources,
               soft_resources = EXCLUDED.soft_resources, set_at = EXCLUDED.set_at,
               set_by = EXCLUDED.set_by`,
            [d.glob, d.maxResources, d.softResources, occurredAt, textParam(actor)],
          );
          break;
        }
        case 'QuotaRemoved':
          await tx.query('DELETE FROM quotas WHERE glob = $1', [event.data.glob]);
          break;
        case 'QuotaExceeded': {
          const d = event.data;
          await tx.query(
            `INSERT INTO quota_overruns (state_id, state_name, version, glob, level, quota_limit,
               resource_count, occurred_at, actor)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (state_id, version) DO NOTHING`,
            [
              d.stateId,
              d.name,
              d.version,
              d.glob,
              d.level,
              d.limit,
              d.count,
              occurredAt,
              textParam(actor),
            ],
          );
          break;
        }
        default:
          break;
      }
    }
  }
}

export const QUOTA_PROJECTORS = [QuotasProjector] as const;
