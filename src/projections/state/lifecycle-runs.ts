import type { RecordedEvent } from '../../domain/shared/event';
import type { ApplyCommitted, LifecycleOpened } from '../../domain/state';
import type { Queryable } from '../../infrastructure/postgres/database';
import { textParam } from '../../infrastructure/postgres/jsonb-text';
import type { ResourceAddresses } from './lifecycle-row';
import { asStateEvent } from './state-event';

// Opens of at least this many rows go through COPY (copyUnlessPresent). A
// batch of 500 events that starts a first commit holds 499 opens: the
// recordset statement took 1.3-1.4 s for them where COPY took 0.2-0.7 s for
// 5,000 rows under the same load (docs/performance-history.md, wave 10).
export const COPY_ROWS = 100;

const UNIQUE_VIOLATION = '23505';

/** A lifecycle to close (closeRows). */
export interface Closing {
  state_id: string;
  address: string;
  version: number;
  serial: number;
}

/** A lifecycle to open: its event's data and the resource address it belongs to. */
export interface Opening {
  data: LifecycleOpened['data'];
  resourceAddress: string;
}

/** Where a projector of lifecycles writes a run of closes, a run of opens, and a commit. */
export interface LifecycleSink {
  close(rows: Closing[]): Promise<void>;
  open(rows: Opening[]): Promise<void>;
  /**
   * An ApplyCommitted, once the runs of its commit are written (ignored
   * without it).
   */
  committed?(data: ApplyCommitted['data']): Promise<void>;
}

/**
 * Feeds a batch's lifecycle events to `sink` as runs: consecutive closes
 * (and opens) are one write each, in event order (the decider emits a
 * commit's closes before its opens, which is also the order they are
 * flushed in). Openings are made as they are met and rows only as they are
 * written: made here, thousands of them would outlive many young collections.
 * A commit's ApplyCommitted comes before its lifecycles; it is written after
 * them (its own rows are another table's), so that a first commit's `COPY`
 * of lifecycles, the longest statement PostgreSQL runs for it, is the first
 * one sent, not one round trip later.
 */
export async function applyLifecycleRuns(
  events: RecordedEvent[],
  addresses: ResourceAddresses,
  sink: LifecycleSink,
): Promise<void> {
  let opened: Opening[] = [];
  let closed: Closing[] = [];
  let commit: ApplyCommitted['data'] | undefined;
  const runs = async () => {
    if (closed.length) await sink.close(closed);
    if (opened.length) await sink.open(opened);
    opened = [];
    closed = [];
  };
  const flush = async () => {
    await runs();
    if (commit !== undefined && sink.committed) await sink.committed(commit);
    commit = undefined;
  };
  for (const recorded of events) {
    const event = asStateEvent(recorded);
    if (event === null) continue;
    if (event.type === 'LifecycleClosed') {
      if (opened.length) await runs();
      closed.push({
        state_id: event.data.stateId,
        address: event.data.address,
        version: event.data.version,
        serial: event.data.serial,
      });
    } else if (event.type === 'LifecycleOpened') {
      opened.push({ data: event.data, resourceAddress: addresses.of(event.data.resource) });
    } else if (event.type === 'ApplyCommitted') {
      await flush();
      commit = event.data;
    }
  }
  await flush();
}

/**
 * Runs `copy` (a COPY into a table with a unique key) under a savepoint.
 * COPY costs the server a fraction of planning and decoding one huge
 * recordset, but cannot skip rows that exist: when a redelivered batch finds
 * a key already there, the savepoint is rolled back and the answer is false,
 * for the caller to write the same rows with a statement that ignores what
 * exists. `copy` is given the statement that takes the savepoint, to send in
 * the COPY's own query (`copyRows`' `first`): the COPY starts at once, not
 * one round trip later (while kld prepares other read models' rows, the
 * savepoint's answer can wait tens of milliseconds for its turn).
 */
export async function copyUnlessPresent(
  tx: Queryable,
  copy: (first: string) => Promise<void>,
): Promise<boolean> {
  try {
    await copy('SAVEPOINT kl_open_copy');
    await tx.query('RELEASE SAVEPOINT kl_open_copy');
    return true;
  } catch (err) {
    if ((err as { code?: unknown }).code !== UNIQUE_VIOLATION) throw err;
    await tx.query('ROLLBACK TO SAVEPOINT kl_open_copy');
    return false;
  }
}

/**
 * Ends the `resources` rows whose lifecycles closed. Only rows still open
 * and created before the closing version are touched, so a redelivered
 * batch changes nothing. The rows go as arrays, whose length the planner
 * knows: a recordset counts as 100 rows, and for a delta's few closes it
 * hashed every live row of the state instead of looking each one up
 * (docs/performance-history.md, "The next-serial push (wave 14)").
 */
export async function closeRows(tx: Queryable, rows: Closing[]): Promise<void> {
  await tx.query(
    `UPDATE resources t SET delete_version = c.version, delete_serial = c.serial
       FROM unnest($1::uuid[], $2::text[], $3::integer[], $4::bigint[])
            AS c(state_id, address, version, serial)
      WHERE t.state_id = c.state_id AND t.address = c.address
        AND t.delete_version IS NULL AND t.create_version < c.version`,
    [
      rows.map((r) => r.state_id),
      rows.map((r) => textParam(r.address)),
      rows.map((r) => r.version),
      rows.map((r) => r.serial),
    ],
  );
}
