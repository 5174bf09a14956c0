import type { RecordedEvent } from '../../domain/shared/event';
import { RefreshEventType, ResourceRefreshed } from '../../domain/refresh/refresh-run.events';
import type { Queryable } from '../../infrastructure/postgres/database';
import { jsonbText, textParam } from '../../infrastructure/postgres/jsonb-text';
import { Projector } from '../projector';
import { asRefreshEvent } from './refresh-event';

interface ResultRow {
  run_id: string;
  state_id: string;
  address: string;
  provider: string;
  outcome: string;
  before_hash: string;
  after_hash: string | null;
  changed_paths: string[];
  error: string | null;
}

const resultRow = (d: ResourceRefreshed['data']): ResultRow => ({
  run_id: d.runId,
  state_id: d.stateId,
  address: d.address,
  provider: d.provider,
  outcome: d.outcome,
  before_hash: d.beforeHash,
  after_hash: d.afterHash,
  changed_paths: d.changedPaths,
  error: d.error ?? null,
});

/**
 * `refresh_runs` and `refresh_results`. A run reports thousands of results,
 * so consecutive ResourceRefreshed events are written as one upsert, and the
 * counts of the runs they touched are recounted from the rows (a later result
 * for an address replaces the earlier one, which a running total would count
 * twice). Idempotent: starts ignore an existing run, results are upserts, and
 * counts and finishes only touch runs still running.
 */
@Projector()
export class RefreshRunsProjector implements Projector {
  readonly name = 'refresh-runs';
  readonly handles = [
    RefreshEventType.RefreshStarted,
    RefreshEventType.ResourceRefreshed,
    RefreshEventType.RefreshFinished,
  ];
  readonly tables = ['refresh_runs', 'refresh_results'];

  async apply(events: RecordedEvent[], tx: Queryable): Promise<void> {
    // Keyed by run and address: one statement may not upsert a row twice.
    let pending = new Map<string, ResultRow>();
    const flush = async () => {
      if (pending.size) await this.record(tx, [...pending.values()]);
      pending = new Map();
    };
    for (const recorded of events) {
      const event = asRefreshEvent(recorded);
      if (event === null) continue;
      const at = recorded.metadata.occurredAt;
      switch (event.type) {
        case 'RefreshStarted': {
          await flush();
          const d = event.data;
          await tx.query(
            `INSERT INTO refresh_runs (run_id, state_id, state_name, from_version, from_serial,
               status, actor, dry_run, started_at)
             VALUES ($1, $2, $3, $4, $5, 'running', $6, $7, $8)
             ON CONFLICT (run_id) DO NOTHING`,
            [
              d.runId,
              d.stateId,
              textParam(d.stateName),
              d.fromVersion,
              d.fromSerial,
              textParam(recorded.metadata.actor),
              d.dryRun,
              at,
            ],
          );
          break;
        }
        case 'ResourceRefreshed': {
          const row = resultRow(event.data);
          const key = `${row.run_id} ${row.address}`;
          pending.delete(key); // keep the order of the latest
          pending.set(key, row);
          break;
        }
        case 'RefreshFinished': {
          await flush();
          const d = event.data;
          await tx.query(
            `UPDATE refresh_runs SET status = $2, checked = $3, changed = $4, failed = $5,
                    to_version = $6, to_serial = $7, error_summary = $8, finished_at = $9,
                    normalized = $10, skipped = $11
              WHERE run_id = $1 AND status = 'running'`,
            [
              d.runId,
              d.status,
              d.checked,
              d.changed,
              d.failed,
              d.toVersion,
              d.toSerial,
              textParam(d.errorSummary),
              at,
              d.normalized ?? 0,
              d.skipped ?? 0,
            ],
          );
          break;
        }
        default:
          break;
      }
    }
    await flush();
  }

  private async record(tx: Queryable, rows: ResultRow[]): Promise<void> {
    await tx.query(
      `INSERT INTO refresh_results (run_id, state_id, address, provider, outcome, before_hash,
         after_hash, changed_paths, error)
       SELECT run_id, state_id, address, provider, outcome, before_hash, after_hash,
              changed_paths, error
         FROM jsonb_to_recordset($1::jsonb) AS r(run_id uuid, state_id uuid, address text,
              provider text, outcome text, before_hash text, after_hash text,
              changed_paths jsonb, error text)
       ON CONFLICT (run_id, address) DO UPDATE SET
         provider = EXCLUDED.provider, outcome = EXCLUDED.outcome,
         before_hash = EXCLUDED.before_hash, after_hash = EXCLUDED.after_hash,
         changed_paths = EXCLUDED.changed_paths, error = EXCLUDED.error`,
      [jsonbText(rows)],
    );
    const runs = [...new Set(rows.map((r) => r.run_id))];
    await tx.query(
      `UPDATE refresh_runs r SET checked = c.checked, changed = c.changed, failed = c.failed,
              normalized = c.normalized, skipped = c.skipped
         FROM (SELECT run_id, count(*) FILTER (WHERE outcome <> 'skipped')::int AS checked,
                      count(*) FILTER (WHERE outcome IN ('drifted', 'gone'))::int AS changed,
                      count(*) FILTER (WHERE outcome = 'failed')::int AS failed,
                      count(*) FILTER (WHERE outcome = 'normalized')::int AS normalized,
                      count(*) FILTER (WHERE outcome = 'skipped')::int AS skipped
                 FROM refresh_results WHERE run_id = ANY($1::uuid[]) GROUP BY run_id) c
        WHERE r.run_id = c.run_id AND r.status = 'running'`,
      [runs],
    );
  }
}
