import type { ApplyRunLookup } from '../../application/apply-runs/apply-run-read.port';
import type { JsonObject } from '../../domain/terraform';
import type { Database } from '../postgres/database';
import type {
  ApplyRun,
  ApplyRunSummary,
  HeldReservations,
  ReservationRow,
} from '../../domain/wire/runs';

interface RunFieldsRow {
  run_id: string;
  state_name: string;
  actor: string;
  status: string;
  lane: string;
  base_version: number;
  started_at: Date;
  finished_at: Date | null;
  finished_by: string | null;
  added: number | null;
  changed: number | null;
  destroyed: number | null;
  committed_version: number | null;
  committed_serial: string | null;
  error_summary: string | null;
  has_output_state: boolean;
}

interface RunRow extends RunFieldsRow {
  write_set: string[];
  read_set: string[];
  reservations: { id: string; glob: string; mode: string }[];
  info: JsonObject;
}

interface ListedRunRow extends RunFieldsRow {
  write_globs: number;
  first_write_globs: string[];
  read_globs: number;
  first_read_globs: string[];
}
/** A listed run's error summary: its first line, cut after this many characters. */
export const LISTED_ERROR_CHARS = 200;

const FIELD_COLUMNS = `run_id, state_name, actor, status, lane, base_version, started_at,
  finished_at, finished_by, added, changed, destroyed, committed_version, committed_serial,
  output_state IS NOT NULL AS has_output_state`;

const RUN_COLUMNS = `${FIELD_COLUMNS}, error_summary, write_set, read_set, reservations, info`;

export function outputStatePath(state: string, runId: string): string {
  return `/v1/api/states/${state}/apply-runs/${runId}/output-state`;
}

function fieldsOf(r: RunFieldsRow) {
  return {
    run_id: r.run_id,
    state: r.state_name,
    actor: r.actor,
    status: r.status,
    lane: r.lane,
    base_version: r.base_version,
    started_at: r.started_at.toISOString(),
    finished_at: r.finished_at?.toISOString() ?? null,
    finished_by: r.finished_by,
    counters:
      r.added === null && r.changed === null && r.destroyed === null
        ? null
        : { add: r.added ?? 0, change: r.changed ?? 0, destroy: r.destroyed ?? 0 },
    committed_version: r.committed_version,
    committed_serial: r.committed_serial === null ? null : Number(r.committed_serial),
    error_summary: r.error_summary,
    output_state: r.has_output_state ? outputStatePath(r.state_name, r.run_id) : null,
  };
}

function runOf(r: RunRow): ApplyRun {
  return {
    ...fieldsOf(r),
    write_set: r.write_set,
    read_set: r.read_set,
    reservations: r.reservations,
    info: r.info,
  };
}

function listedRunOf(r: ListedRunRow): ApplyRunSummary {
  return {
    ...fieldsOf(r),
    write: { count: r.write_globs, first: r.first_write_globs },
    read: { count: r.read_globs, first: r.first_read_globs },
  };
}

/** The queries behind the reservations and apply-run routes, `kl reservations` and `kl runs`. */
export class ApplyReadModel implements ApplyRunLookup {
  constructor(private readonly db: Database) {}

  /**
   * Reservations held at `now` (a run whose lease ran out holds nothing),
   * oldest first, and each listed run's info once: a run of N globs shares
   * one info, and repeating it on each row made the answer N times its size
   * (a `kl state rm` of 5,000 addresses: about 700 MB, a 500 after 30 s).
   * One statement, so every listed run has its info.
   */
  async reservations(now: Date, state?: string): Promise<HeldReservations> {
    const rows = await this.db.query<{
      id: string;
      state_name: string;
      kind: ReservationRow['kind'];
      run_id: string | null;
      address_glob: string;
      mode: ReservationRow['mode'];
      holder: string;
      info: JsonObject | null;
      run_info: JsonObject | null;
      acquired_at: Date;
      expires_at: Date | null;
    }>(
      `SELECT h.id, h.state_name, h.kind, h.run_id, h.address_glob, h.mode, h.holder, h.info,
              CASE WHEN h.kind = 'apply'
                    AND row_number() OVER (PARTITION BY h.state_id, h.run_id
                                             ORDER BY h.acquired_at, h.address_glob, h.id) = 1
                   THEN i.info END AS run_info,
              h.acquired_at, h.expires_at
         FROM reservation_holders h
         LEFT JOIN reservation_run_info i
           ON h.kind = 'apply' AND i.state_id = h.state_id AND i.run_id = h.run_id
        WHERE ($1::text IS NULL OR h.state_name = $1)
          AND (h.expires_at IS NULL OR h.expires_at > $2)
        ORDER BY h.state_name, h.acquired_at, h.run_id, h.address_glob, h.id`,
      [state ?? null, now],
    );
    const runs: HeldReservations['runs'] = [];
    for (const r of rows) {
      if (r.run_info !== null)
        runs.push({ run_id: r.run_id!, state: r.state_name, info: r.run_info });
    }
    return {
      reservations: rows.map((r) => ({
        id: r.id,
        state: r.state_name,
        kind: r.kind,
        run_id: r.run_id,
        glob: r.address_glob,
        mode: r.mode,
        actor: r.holder,
        info: r.info,
        acquired_at: r.acquired_at.toISOString(),
        expires_at: r.expires_at?.toISOString() ?? null,
      })),
      runs,
    };
  }

  /**
   * Runs, newest first; of one state when named. Each is a summary: a run's
   * sets, reservations and info are as long as its plan (5,000 addresses
   * made about 700 KB a run, so 100 runs 69 MB and 1,000 a 500 after 35 s
   * and 2.3 GB of kld's memory), and stay with `run`; its globs are counted
   * when it starts (migration 041).
   * `readable`: LIKE patterns of the state names to list (null: every state).
   */
  async runs(
    state?: string,
    limit = 100,
    readable: string[] | null = null,
  ): Promise<ApplyRunSummary[]> {
    const rows = await this.db.query<ListedRunRow>(
      `SELECT ${FIELD_COLUMNS},
              CASE WHEN length(line) > $4 THEN left(line, $4) || '…' ELSE line END
                AS error_summary,
              write_globs, first_write_globs, read_globs, first_read_globs
         FROM (SELECT *, split_part(error_summary, E'\\n', 1) AS line FROM apply_runs
                WHERE ($1::text IS NULL OR state_name = $1)
                  AND ($3::text[] IS NULL OR state_name LIKE ANY ($3::text[]))
                ORDER BY started_at DESC, run_id LIMIT $2) a
        ORDER BY started_at DESC, run_id`,
      [state ?? null, limit, readable, LISTED_ERROR_CHARS],
    );
    return rows.map(listedRunOf);
  }

  async run(runId: string): Promise<ApplyRun | null> {
    const rows = await this.db.query<RunRow>(
      `SELECT ${RUN_COLUMNS} FROM apply_runs WHERE run_id = $1`,
      [runId],
    );
    return rows.length ? runOf(rows[0]) : null;
  }

  /** The document a run that did not commit kept, as the JSON text it was stored as. */
  async outputState(runId: string): Promise<string | null> {
    const rows = await this.db.query<{ output_state: string | null }>(
      'SELECT output_state::text AS output_state FROM apply_runs WHERE run_id = $1',
      [runId],
    );
    return rows[0]?.output_state ?? null;
  }

  async stateOfRun(runId: string): Promise<string | null> {
    const rows = await this.db.query<{ state_name: string }>(
      `SELECT state_name FROM apply_runs WHERE run_id = $1
       UNION ALL
       SELECT state_name FROM resource_reservations WHERE run_id = $1
       LIMIT 1`,
      [runId],
    );
    return rows[0]?.state_name ?? null;
  }
}
