import { ApplyEventType } from '../../domain/apply';
import { LISTED_GLOBS } from '../../domain/wire/runs';
import type { RecordedEvent } from '../../domain/shared/event';
import { stringifyJson } from '../../domain/terraform/lossless-json';
import type { Queryable } from '../../infrastructure/postgres/database';
import { jsonbText, textParam } from '../../infrastructure/postgres/jsonb-text';
import { Projector } from '../projector';
import { asApplyEvent } from './apply-event';

/**
 * `apply_runs`: one row per run, inserted when it starts and completed when
 * it ends. Idempotent: a start ignores an existing row, an end only touches
 * a run still running.
 */
@Projector()
export class ApplyRunsProjector implements Projector {
  readonly name = 'apply-runs';
  readonly handles = [ApplyEventType.ApplyStarted, ApplyEventType.ApplyFinished];
  readonly tables = ['apply_runs'];

  async apply(events: RecordedEvent[], tx: Queryable): Promise<void> {
    for (const recorded of events) {
      const event = asApplyEvent(recorded);
      if (event === null) continue;
      const at = recorded.metadata.occurredAt;
      const actor = textParam(recorded.metadata.actor);
      if (event.type === 'ApplyStarted') {
        const d = event.data;
        // The listing's summary, kept here so a listing never reads the reservations.
        const globs = (mode: string) =>
          d.reservations.filter((r) => r.mode === mode).map((r) => textParam(r.glob));
        const write = globs('write');
        const read = globs('read');
        await tx.query(
          `INSERT INTO apply_runs (run_id, state_id, state_name, actor, status, lane,
             base_version, write_set, read_set, reservations, info, started_at,
             write_globs, read_globs, first_write_globs, first_read_globs)
           VALUES ($1, $2, $3, $4, 'running', $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
           ON CONFLICT (run_id) DO NOTHING`,
          [
            textParam(d.runId),
            d.stateId,
            textParam(d.stateName),
            actor,
            d.lane,
            d.baseVersion,
            d.writeSet.map(textParam),
            d.readSet.map(textParam),
            jsonbText(d.reservations),
            jsonbText(d.info),
            at,
            write.length,
            read.length,
            write.slice(0, LISTED_GLOBS),
            read.slice(0, LISTED_GLOBS),
          ],
        );
      } else {
        const d = event.data;
        // A commit recorded after an ending that raced it replaces that ending (the decider's finish).
        await tx.query(
          `UPDATE apply_runs SET status = $2, finished_at = $3, finished_by = $4,
                  added = $5, changed = $6, destroyed = $7, committed_version = $8,
                  committed_serial = $9, error_summary = $10, output_state = $11
            WHERE run_id = $1
              AND (status = 'running' OR ($2 = 'committed' AND status <> 'committed'))`,
          [
            textParam(d.runId),
            d.status,
            at,
            actor,
            d.counters?.add ?? null,
            d.counters?.change ?? null,
            d.counters?.destroy ?? null,
            d.version,
            d.serial,
            textParam(d.errorSummary),
            // json, not jsonb: the document exactly as terraform left it
            d.outputState === null ? null : stringifyJson(d.outputState),
          ],
        );
      }
    }
  }
}
