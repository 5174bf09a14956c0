import { PoolClient } from 'pg';
import {
  AppendInFlight,
  AppendResult,
  EventStore,
  EventToAppend,
  ExpectedRevision,
  ReadStreamOptions,
  StoreSession,
  StreamRevision,
} from '../../application/ports/event-store.port';
import {
  EventIdConflictError,
  WrongExpectedRevisionError,
} from '../../domain/shared/concurrency-error';
import {
  comparePositions,
  EventMetadata,
  LoggedEvent,
  LogPosition,
  RecordedEvent,
} from '../../domain/shared/event';
import { Upcasters } from '../../domain/shared/upcasting';
import { Database, Queryable } from '../postgres/database';
import { Notifier } from '../postgres/notifier';
import { prepared } from '../postgres/prepared-statement';
import {
  binaryInt4,
  binaryInt8,
  binaryJsonb,
  binaryText,
  copyBinaryRows,
} from '../postgres/copy-rows';
import { DEFAULT_CACHE_BUDGETS } from '../../application/bounded-cache';
import { HeldAppends } from './held-appends';

const EVENTS_CHANNEL = 'kl_events';

// Rows per INSERT statement: keeps memory per statement bounded while the
// whole append stays one transaction.
const INSERT_CHUNK = 10_000;
// Appends of at least this many events are streamed with COPY (copyEvents).
const COPY_EVENTS = 1000;
// Appends of at most this many events (a lock, an unlock, a commit of a few
// instances) are one statement: one round trip, no BEGIN and COMMIT.
const ONE_STATEMENT = 100;
// The unique index on kl_events.event_id (migration 009).
const EVENT_ID_INDEX = 'kl_events_event_id';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

interface EventRow {
  global_position: string;
  txid: string;
  event_id: string;
  stream_id: string;
  stream_revision: string;
  type: string;
  schema_version: number;
  data: unknown;
  metadata: EventMetadata;
}

const EVENT_COLUMNS =
  'global_position, transaction_id::text AS txid, event_id, stream_id, stream_revision, type, ' +
  'schema_version, data, metadata';

// Only transactions older than every transaction still running are visible
// (`kl_log_horizon`, from `pg_snapshot_xmin`), so an event can never appear
// behind a position a reader has already passed. The horizon is taken once
// per query (a scalar subquery, i.e. an InitPlan): evaluated per row it moves
// during the scan and lets a late row through ahead of an earlier one.
// Transaction ids carry the log's epoch (migrations/012_log_epochs.sql).
const COMMITTED = 'transaction_id < (SELECT kl_log_horizon())';

function toRecordedEvent(row: EventRow): RecordedEvent {
  return {
    eventId: row.event_id,
    type: row.type,
    schemaVersion: row.schema_version,
    data: row.data,
    metadata: row.metadata,
    streamId: row.stream_id,
    streamRevision: BigInt(row.stream_revision),
    position: {
      transactionId: BigInt(row.txid),
      globalPosition: BigInt(row.global_position),
    },
  };
}

/** Events after `from` in log order (EventStore.readAll). */
async function readLogAfter(
  q: Queryable,
  from: LogPosition,
  limit: number,
  onlyTypes?: readonly string[],
): Promise<RecordedEvent[]> {
  const dataColumn = onlyTypes ? 'CASE WHEN type = ANY($4) THEN data END AS data' : 'data';
  const params: unknown[] = [from.transactionId.toString(), from.globalPosition.toString(), limit];
  if (onlyTypes) params.push(onlyTypes);
  const { rows } = await q.query<EventRow>(logQuery(dataColumn), params);
  return rows.map(toRecordedEvent);
}

function logQuery(dataColumn: string): string {
  return `SELECT global_position, transaction_id::text AS txid, event_id, stream_id, stream_revision,
                 type, schema_version, ${dataColumn}, metadata
            FROM kl_events
           WHERE (transaction_id, global_position) > ($1::xid8, $2::bigint) AND ${COMMITTED}
           ORDER BY kl_events.transaction_id, kl_events.global_position
           LIMIT $3`;
}

// json::text is the stored text as it is: node-pg hands it over unparsed.
const LOG_TEXT_QUERY = logQuery('data::text AS data');
const STREAM_TEXT_QUERY = `SELECT ${EVENT_COLUMNS.replace(/\bdata\b/, 'data::text AS data')} FROM kl_events
  WHERE stream_id = $1 AND stream_revision >= $2
  ORDER BY stream_revision
  LIMIT $3`;

/**
 * An event as readLog reads it: its data stays the stored JSON text until
 * something asks for `data`. The text is kept in a private field and read
 * through getters, so a copy (`{ ...event }`, as an upcaster makes) has no
 * `dataJson` and never carries text that no longer matches its data.
 */
class TextDataEvent implements LoggedEvent {
  readonly eventId: string;
  readonly type: string;
  readonly schemaVersion: number;
  readonly metadata: EventMetadata;
  readonly streamId: string;
  readonly streamRevision: bigint;
  readonly position: LogPosition;
  readonly #text: string;
  #data: unknown = UNPARSED;

  constructor(row: EventRow & { data: string }) {
    this.eventId = row.event_id;
    this.type = row.type;
    this.schemaVersion = row.schema_version;
    this.metadata = row.metadata;
    this.streamId = row.stream_id;
    this.streamRevision = BigInt(row.stream_revision);
    this.position = {
      transactionId: BigInt(row.txid),
      globalPosition: BigInt(row.global_position),
    };
    this.#text = row.data;
  }

  get dataJson(): string {
    return this.#text;
  }

  /** As node-pg parses a json column (JSON.parse): the same value readAll gives. */
  get data(): unknown {
    if (this.#data === UNPARSED) this.#data = JSON.parse(this.#text);
    return this.#data;
  }
}

const UNPARSED = Symbol('unparsed');

/** What one append wrote: its result, and each event's global position, in order. */
interface Appended {
  result: AppendResult;
  positions: readonly bigint[];
}

export class PostgresEventStore implements EventStore {
  private readonly held: HeldAppends;
  /** Confirmations of held appends being asked now (readAppended), by question. */
  private readonly confirming = new Map<string, Promise<boolean>>();
  /** Told of each append of more than one statement while it is written (watchAppends). */
  private readonly watchers = new Set<(append: AppendInFlight) => void>();

  constructor(
    private readonly db: Database,
    private readonly notifier: Notifier,
    /** Every read hands out events in their type's current shape. */
    private readonly upcasters = new Upcasters(),
    /** Events of recent appends held for `readAppended` (0: none; KL_CACHE_HELD_EVENTS). */
    heldEvents = DEFAULT_CACHE_BUDGETS.heldEvents,
  ) {
    this.held = new HeldAppends(heldEvents);
  }

  async appendToStream(
    streamId: string,
    events: EventToAppend[],
    { expectedRevision, alsoAt }: { expectedRevision: ExpectedRevision; alsoAt?: StreamRevision },
  ): Promise<AppendResult> {
    checkEventIds(events);
    let appended: Appended;
    // Settles what watchers were told of this append (announce), if anything.
    let settle: ((recorded: readonly RecordedEvent[] | null) => void) | undefined;
    try {
      appended =
        events.length > 0 && events.length <= ONE_STATEMENT
          ? await appendInOneStatement(this.db.pool, streamId, events, expectedRevision, alsoAt)
          : await this.db.transaction((tx) =>
              insertEvents(tx, streamId, events, expectedRevision, alsoAt, (length) => {
                if (this.watchers.size > 0) settle = this.announce(streamId, events, length);
              }),
            );
    } catch (err) {
      // Told at once, before anything below asks the pool for a connection:
      // a watcher may hold one and a lock others wait for until it hears.
      settle?.(null);
      // Either way the batch may be a repeat of an append that was stored
      // (and whose answer the writer lost): then that append's result is the
      // answer. Only this path pays for the look-up.
      const repeat = isEventIdViolation(err) || err instanceof WrongExpectedRevisionError;
      if (!repeat || events.length === 0) throw err;
      const stored = await this.storedAppend(streamId, events, expectedRevision);
      if (stored) return stored;
      throw err;
    }
    // The wake-up goes out after the commit, not inside it: a NOTIFY in the
    // transaction takes a database-wide lock through the commit's WAL flush,
    // which serialises every appender. It is only a hint (readers also poll),
    // so a lost one costs latency, never an event.
    if (events.length > 0) {
      const { result, positions } = appended;
      const recorded = this.recorded(
        streamId,
        events,
        result.nextExpectedRevision - BigInt(events.length) + 1n,
        (i) => ({
          transactionId: result.position.transactionId,
          globalPosition: positions[i],
        }),
      );
      settle?.(recorded);
      void this.notifier.notify(EVENTS_CHANNEL, streamId);
      this.held.hold(recorded);
    }
    return appended.result;
  }

  watchAppends(listener: (append: AppendInFlight) => void): () => void {
    this.watchers.add(listener);
    return () => void this.watchers.delete(listener);
  }

  /**
   * Tells the watchers of an append whose stream has just moved to
   * `length` (its events not written yet); returns how to tell them the
   * outcome.
   */
  private announce(
    streamId: string,
    events: EventToAppend[],
    length: bigint,
  ): (recorded: readonly RecordedEvent[] | null) => void {
    let settle!: (recorded: readonly RecordedEvent[] | null) => void;
    const append: AppendInFlight = {
      streamId,
      events: this.recorded(streamId, events, length - BigInt(events.length), () => NO_POSITION),
      committed: new Promise((resolve) => (settle = resolve)),
      nextAfter: (from, recorded, types, session) => nextAfter(session, from, recorded, types),
    };
    for (const watcher of this.watchers) {
      try {
        watcher(append);
      } catch {
        // A watcher's trouble is its own; the append goes on.
      }
    }
    return settle;
  }

  /**
   * An append's events as `readAll` would return them: the same fields,
   * positions (`at`) and upcasting; `data` is the object written (its JSON
   * text is what was stored, and the log's JSON reads back equal).
   */
  private recorded(
    streamId: string,
    events: EventToAppend[],
    first: bigint,
    at: (i: number) => LogPosition,
  ): RecordedEvent[] {
    return events.map((e, i) =>
      this.upcasters.upcast({
        eventId: e.eventId,
        type: e.type,
        schemaVersion: e.schemaVersion,
        data: e.data,
        metadata: e.metadata,
        streamId,
        streamRevision: first + BigInt(i),
        position: at(i),
      }),
    );
  }

  async readAppended(
    from: LogPosition,
    limit: number,
    types?: readonly string[],
  ): Promise<RecordedEvent[] | null> {
    // Held appends that follow one another in the log go out together: a
    // projector that left some for later (ProjectionRunner's loop) takes
    // them in one batch, as readAll would.
    let events: RecordedEvent[] = [];
    let at = from;
    while (events.length < limit) {
      const next = await this.confirmedAfter(at);
      if (next === null) break;
      events = events.length === 0 ? next : events.concat(next);
      at = next[next.length - 1].position;
    }
    if (events.length === 0) return null;
    if (events.length > limit) events = events.slice(0, limit);
    return types ? events.map((e) => (types.includes(e.type) ? e : { ...e, data: null })) : events;
  }

  /** The held append that is the log's next after `from`, or null when none is (or is known to be). */
  private async confirmedAfter(from: LogPosition): Promise<RecordedEvent[] | null> {
    const held = this.held.after(from);
    if (held === null) return null;
    const next = held.events;
    if (!held.confirmed) {
      // The held append is the log's next only once readAll would return its
      // first event next: the same query, the same horizon. Then every event
      // of its transaction follows in order (they are all held), none between.
      // Projectors catching up side by side ask the same question at once:
      // they share one query.
      const head = next[0].position;
      const question = `${from.transactionId}/${from.globalPosition}/${head.globalPosition}`;
      let answer = this.confirming.get(question);
      if (answer === undefined) {
        answer = this.isNext(from, head).finally(() => this.confirming.delete(question));
        this.confirming.set(question, answer);
      }
      if (!(await answer)) return null;
      held.confirm();
    }
    return next;
  }

  /** Whether the log's next committed event after `from` (readAll's horizon) is `head`. */
  private async isNext(from: LogPosition, head: LogPosition): Promise<boolean> {
    const { rows } = await this.db.pool.query<{ txid: string; global_position: string }>(
      prepared(
        `SELECT transaction_id::text AS txid, global_position FROM kl_events
          WHERE (transaction_id, global_position) > ($1::xid8, $2::bigint) AND ${COMMITTED}
          ORDER BY transaction_id, global_position
          LIMIT 1`,
        [from.transactionId.toString(), from.globalPosition.toString()],
      ),
    );
    return (
      rows.length === 1 &&
      BigInt(rows[0].txid) === head.transactionId &&
      BigInt(rows[0].global_position) === head.globalPosition
    );
  }

  heldAppend(transactionId: bigint): readonly RecordedEvent[] | null {
    return this.held.ofTransaction(transactionId);
  }

  releaseAppends(position: LogPosition): void {
    this.held.release(position);
  }

  /**
   * The result of the earlier append `events` repeats, or null when none of
   * their ids is stored. Any other overlap with stored events is a conflict.
   */
  private async storedAppend(
    streamId: string,
    events: EventToAppend[],
    expected: ExpectedRevision,
  ): Promise<AppendResult | null> {
    const { rows } = await this.db.pool.query<{
      ord: string;
      event_id: string;
      stream_id: string;
      stream_revision: string;
      global_position: string;
      txid: string;
      same: boolean;
    }>(
      `SELECT u.ord, e.event_id, e.stream_id, e.stream_revision, e.global_position,
              e.transaction_id::text AS txid,
              (e.type = u.type AND e.schema_version = u.schema_version
               AND e.data::text = u.data AND e.metadata = u.metadata::jsonb) AS same
         FROM unnest($1::uuid[], $2::text[], $3::int[],
                     string_to_array($4, chr(10)), string_to_array($5, chr(10)))
              WITH ORDINALITY AS u(event_id, type, schema_version, data, metadata, ord)
         JOIN kl_events e ON e.event_id = u.event_id
        ORDER BY u.ord`,
      [
        events.map((e) => e.eventId),
        events.map((e) => e.type),
        events.map((e) => e.schemaVersion),
        jsonLines(events.map((e) => e.data)),
        jsonLines(events.map((e) => e.metadata)),
      ],
    );
    if (rows.length === 0) return null;
    for (const row of rows) {
      if (row.stream_id !== streamId) {
        throw new EventIdConflictError(streamId, row.event_id, `in stream ${row.stream_id}`);
      }
      if (!row.same) throw new EventIdConflictError(streamId, row.event_id, 'with other content');
    }
    if (rows.length !== events.length) {
      throw new EventIdConflictError(
        streamId,
        rows[0].event_id,
        'by an append that did not hold this whole batch',
      );
    }
    const first = BigInt(rows[0].stream_revision);
    const start =
      expected === 'no_stream' ? 0n : typeof expected === 'bigint' ? expected + 1n : first;
    for (const [i, row] of rows.entries()) {
      const revision = BigInt(row.stream_revision);
      if (revision !== start + BigInt(i) || row.txid !== rows[0].txid) {
        throw new EventIdConflictError(
          streamId,
          row.event_id,
          `at revision ${revision}, not where this append puts it`,
        );
      }
    }
    const last = rows[rows.length - 1];
    // One append is one transaction: a neighbour written by the same one means
    // the batch is only part of that append.
    const wider = await this.db.pool.query(
      `SELECT 1 FROM kl_events
        WHERE stream_id = $1 AND stream_revision IN ($2::bigint - 1, $3::bigint + 1)
          AND transaction_id = $4::xid8`,
      [streamId, first.toString(), last.stream_revision, last.txid],
    );
    if (wider.rows.length > 0) {
      throw new EventIdConflictError(
        streamId,
        rows[0].event_id,
        'by an append that held more than this batch',
      );
    }
    const position = rows.reduce(
      (max, r) =>
        BigInt(r.global_position) > max.globalPosition
          ? { transactionId: BigInt(r.txid), globalPosition: BigInt(r.global_position) }
          : max,
      { transactionId: 0n, globalPosition: 0n },
    );
    return { nextExpectedRevision: BigInt(last.stream_revision), position };
  }

  async readStream(streamId: string, options: ReadStreamOptions = {}): Promise<LoggedEvent[]> {
    const params = [streamId, (options.fromRevision ?? 0n).toString(), options.maxCount ?? null];
    if (options.dataAsText) {
      const { rows } = await this.db.pool.query<EventRow & { data: string }>(
        STREAM_TEXT_QUERY,
        params,
      );
      return rows.map((row) => this.upcasters.upcast<LoggedEvent>(new TextDataEvent(row)));
    }
    const { rows } = await this.db.pool.query<EventRow>(
      `SELECT ${EVENT_COLUMNS} FROM kl_events
        WHERE stream_id = $1 AND stream_revision >= $2
        ORDER BY stream_revision
        LIMIT $3`,
      params,
    );
    return rows.map((row) => this.upcasters.upcast(toRecordedEvent(row)));
  }

  async readAll(
    from: LogPosition,
    limit: number,
    types?: readonly string[],
  ): Promise<RecordedEvent[]> {
    const events = await readLogAfter(this.db.pool, from, limit, types);
    // Events read without their data (not of `types`) stay as they are.
    return events.map((e) => (types && !types.includes(e.type) ? e : this.upcasters.upcast(e)));
  }

  async readLog(from: LogPosition, limit: number): Promise<LoggedEvent[]> {
    const { rows } = await this.db.pool.query<EventRow & { data: string }>(LOG_TEXT_QUERY, [
      from.transactionId.toString(),
      from.globalPosition.toString(),
      limit,
    ]);
    return rows.map((row) => this.upcasters.upcast<LoggedEvent>(new TextDataEvent(row)));
  }

  async readAt(globalPosition: bigint): Promise<RecordedEvent | null> {
    const { rows } = await this.db.pool.query<EventRow>(
      `SELECT ${EVENT_COLUMNS} FROM kl_events WHERE global_position = $1 AND ${COMMITTED}`,
      [globalPosition.toString()],
    );
    return rows.length ? this.upcasters.upcast(toRecordedEvent(rows[0])) : null;
  }

  lastPosition(): Promise<LogPosition | null> {
    return this.lastWhere(`WHERE ${COMMITTED}`);
  }

  headPosition(): Promise<LogPosition | null> {
    return this.lastWhere('');
  }

  private async lastWhere(where: string): Promise<LogPosition | null> {
    const { rows } = await this.db.pool.query<{ txid: string; global_position: string }>(
      prepared(
        `SELECT transaction_id::text AS txid, global_position FROM kl_events ${where}
          ORDER BY transaction_id DESC, global_position DESC LIMIT 1`,
        [],
      ),
    );
    if (rows.length === 0) return null;
    return {
      transactionId: BigInt(rows[0].txid),
      globalPosition: BigInt(rows[0].global_position),
    };
  }

  waitForAppend(timeoutMs: number, signal?: AbortSignal, since?: number): Promise<void> {
    return this.notifier.wait(EVENTS_CHANNEL, timeoutMs, signal, since);
  }

  appendMark(): number {
    return this.notifier.mark(EVENTS_CHANNEL);
  }

  async contains(position: LogPosition): Promise<boolean> {
    const { rows } = await this.db.pool.query(
      'SELECT 1 FROM kl_events WHERE global_position = $1 AND transaction_id = $2::xid8',
      [position.globalPosition.toString(), position.transactionId.toString()],
    );
    return rows.length === 1;
  }

  async *subscribe(from: LogPosition, signal: AbortSignal): AsyncIterable<LoggedEvent> {
    let position = from;
    const batchSize = 1000;
    // Reads in a row that stopped short of a committed event: it is behind
    // the horizon (an older transaction, maybe one that appends nothing and
    // so signals nothing, is open). Look again soon, backing off, rather
    // than at the next signal or timeout.
    let hidden = 0;
    while (!signal.aborted) {
      const mark = this.appendMark();
      const batch = await this.readLog(position, batchSize);
      for (const event of batch) {
        if (signal.aborted) return;
        yield event;
        position = event.position;
      }
      if (batch.length === batchSize) continue;
      const head = await this.headPosition();
      hidden = head !== null && comparePositions(head, position) > 0 ? hidden + 1 : 0;
      await this.waitForAppend(hidden > 0 ? Math.min(100, 2 ** hidden) : 250, signal, mark);
    }
  }
}

/**
 * A small append as one statement, so one round trip and one transaction:
 * the stream's length moves (the same condition and row lock as
 * advanceStream) and the events are inserted after it, the same rows
 * insertEvents writes. When the expectation does not hold nothing is
 * inserted, and the stream's actual length is read for the error.
 */
async function appendInOneStatement(
  q: Queryable,
  streamId: string,
  events: EventToAppend[],
  expectedRevision: ExpectedRevision,
  alsoAt?: StreamRevision,
): Promise<Appended> {
  const { sql: advance, params } = advanceStatement(
    streamId,
    BigInt(events.length),
    expectedRevision,
    alsoAt,
  );
  const n = params.length;
  const { rows } = await q.query<{
    length: string | null;
    global_position: string;
    txid: string;
    positions: string[] | null;
  }>(
    prepared(
      `WITH advanced AS (${advance}),
     appended AS (
       INSERT INTO kl_events (event_id, stream_id, stream_revision, type, schema_version,
                              data, metadata, transaction_id)
       SELECT u.event_id, $1, a.length - $2::bigint + u.ord - 1, u.type, u.schema_version,
              u.data::json, u.metadata::jsonb, (SELECT kl_log_xact())
         FROM advanced a,
              unnest($${n + 1}::uuid[], $${n + 2}::text[], $${n + 3}::int[],
                     string_to_array($${n + 4}, chr(10)), string_to_array($${n + 5}, chr(10)))
              WITH ORDINALITY AS u(event_id, type, schema_version, data, metadata, ord)
        ORDER BY u.ord
       RETURNING global_position, transaction_id, stream_revision
     )
     SELECT (SELECT length::text FROM advanced) AS length,
            max(global_position) AS global_position, max(transaction_id::text) AS txid,
            array_agg(global_position ORDER BY stream_revision) AS positions
       FROM appended`,
      [
        ...params,
        events.map((e) => e.eventId),
        events.map((e) => e.type),
        events.map((e) => e.schemaVersion),
        jsonLines(events.map((e) => e.data)),
        jsonLines(events.map((e) => e.metadata)),
      ],
    ),
  );
  const [row] = rows;
  if (row.length === null) throw await wrongRevision(q, streamId, expectedRevision, alsoAt);
  if (row.positions?.length !== events.length) {
    throw new Error(
      `append of ${events.length} events to ${streamId} wrote ${row.positions?.length}`,
    );
  }
  return {
    result: {
      nextExpectedRevision: BigInt(row.length) - 1n,
      position: { transactionId: BigInt(row.txid), globalPosition: BigInt(row.global_position) },
    },
    positions: row.positions.map((p) => BigInt(p)),
  };
}

/** An event's position before its append commits (AppendInFlight.events). */
const NO_POSITION: LogPosition = { transactionId: 0n, globalPosition: 0n };

/** AppendInFlight.nextAfter, asked on `session`. */
async function nextAfter(
  session: StoreSession,
  from: LogPosition,
  recorded: readonly RecordedEvent[],
  types: readonly string[],
): Promise<'next' | 'unsettled' | 'not next'> {
  const head = recorded[0].position;
  // The first event of `types` between, in log order: PostgreSQL plans an
  // EXISTS over the row comparisons as a scan of the whole log (it cannot
  // tell how few events lie between; PostgreSQL drops an EXISTS's ORDER BY
  // and LIMIT), which grew with every event ever stored: ~10 ms more of its
  // CPU per 20,000 (docs/performance-history.md, wave 15). Ordered and limited, it
  // walks the log's index from `from` and stops at `head`.
  const { rows } = (await session.query(
    `SELECT ($3::xid8, $4::bigint) > ($1::xid8, $2::bigint) AS after,
            (SELECT kl_log_horizon()) > $3::xid8 AS settled,
            (SELECT global_position FROM kl_events
              WHERE (transaction_id, global_position) > ($1::xid8, $2::bigint)
                AND (transaction_id, global_position) < ($3::xid8, $4::bigint)
                AND type = ANY($5)
              ORDER BY transaction_id, global_position
              LIMIT 1) IS NOT NULL AS between`,
    [
      from.transactionId.toString(),
      from.globalPosition.toString(),
      head.transactionId.toString(),
      head.globalPosition.toString(),
      types,
    ],
  )) as { rows: { after: boolean; settled: boolean; between: boolean }[] };
  const [row] = rows;
  // An event of `types` found between stays there; one not found yet may
  // still come from a transaction older than the horizon.
  if (!row.after || row.between) return 'not next';
  return row.settled ? 'next' : 'unsettled';
}

async function insertEvents(
  tx: PoolClient,
  streamId: string,
  events: EventToAppend[],
  expectedRevision: ExpectedRevision,
  alsoAt?: StreamRevision,
  /** Told the stream's new length once it has moved, before any event is written. */
  advanced?: (length: bigint) => void,
): Promise<Appended> {
  const count = BigInt(events.length);
  const length = await advanceStream(tx, streamId, count, expectedRevision, alsoAt);
  advanced?.(length);
  if (events.length >= COPY_EVENTS) return copyEvents(tx, streamId, events, length);
  let base = length - count;
  let last: { global_position: string; txid: string } | undefined;
  const positions: bigint[] = [];
  for (let i = 0; i < events.length; i += INSERT_CHUNK) {
    const chunk = events.slice(i, i + INSERT_CHUNK);
    // Data and metadata travel as JSON lines, one text parameter each:
    // JSON.stringify never writes a raw newline, and PostgreSQL splits the
    // lines in C, where a text[] parameter would have node-pg escape every
    // quote of every event. `data` is cast to json, which keeps the text
    // exactly as written, \u0000 escapes included. The transaction's log key
    // (kl_log_xact: its id in the log's epoch) is taken once per statement.
    const { rows } = await tx.query<{
      global_position: string;
      txid: string;
      positions: string[];
    }>(
      `WITH appended AS (
         INSERT INTO kl_events (event_id, stream_id, stream_revision, type, schema_version,
                                data, metadata, transaction_id)
         SELECT u.event_id, $1, $2::bigint + u.ord - 1, u.type, u.schema_version, u.data::json,
                u.metadata::jsonb, (SELECT kl_log_xact())
           FROM unnest($3::uuid[], $4::text[], $5::int[],
                       string_to_array($6, chr(10)), string_to_array($7, chr(10)))
                WITH ORDINALITY AS u(event_id, type, schema_version, data, metadata, ord)
          ORDER BY u.ord
         RETURNING global_position, transaction_id, stream_revision
       )
       SELECT max(global_position) AS global_position, max(transaction_id::text) AS txid,
              array_agg(global_position ORDER BY stream_revision) AS positions
         FROM appended`,
      [
        streamId,
        base.toString(),
        chunk.map((e) => e.eventId),
        chunk.map((e) => e.type),
        chunk.map((e) => e.schemaVersion),
        jsonLines(chunk.map((e) => e.data)),
        jsonLines(chunk.map((e) => e.metadata)),
      ],
    );
    base += BigInt(chunk.length);
    for (const row of rows) {
      if (!last || BigInt(row.global_position) > BigInt(last.global_position)) last = row;
      for (const p of row.positions ?? []) positions.push(BigInt(p));
    }
  }
  const position = last
    ? { transactionId: BigInt(last.txid), globalPosition: BigInt(last.global_position) }
    : { transactionId: 0n, globalPosition: 0n };
  return { result: { nextExpectedRevision: length - 1n, position }, positions };
}

/**
 * A big append (a first commit of a big state: an event per instance) as
 * one COPY: the same rows the INSERT above writes, in the same order, with
 * positions from the same sequence (taken row by row, in order, so the last
 * row has the highest) and the transaction's log key worked out once. The
 * stream was advanced in this transaction; any failure aborts all of it.
 */
async function copyEvents(
  tx: PoolClient,
  streamId: string,
  events: EventToAppend[],
  length: bigint,
): Promise<Appended> {
  const { rows } = await tx.query<{ txid: string }>('SELECT kl_log_xact()::text AS txid');
  const txid = rows[0].txid;
  // COPY's binary format: PostgreSQL reads each field by its length instead
  // of scanning the ~20 MB of a 20,000-event append for separators and
  // escapes, and kld doubles no backslash (about a fifth of the COPY's CPU
  // in PostgreSQL, docs/performance-history.md, wave 15). `data` (json) is its text
  // as it is, so the stored text stays exactly what JSON.stringify wrote.
  const stream = binaryText(streamId);
  const transaction = binaryInt8(BigInt(txid));
  const first = length - BigInt(events.length);
  // The fixed-width fields of every row in one buffer each, not three small
  // buffers a row: the ids (checked to be uuids, checkEventIds) as their 16
  // bytes, the revisions as 8.
  const ids = Buffer.allocUnsafe(16 * events.length);
  const revisions = Buffer.allocUnsafe(8 * events.length);
  for (const [i, e] of events.entries()) {
    uuidBytes(e.eventId, ids, 16 * i);
    revisions.writeBigInt64BE(first + BigInt(i), 8 * i);
  }
  await copyBinaryRows(
    tx,
    'kl_events',
    [
      'event_id',
      'stream_id',
      'stream_revision',
      'type',
      'schema_version',
      'data',
      'metadata',
      'transaction_id',
    ],
    (function* () {
      // An append's events usually share one metadata object: written once;
      // so do their types and schema versions, a few between them.
      let metadata: unknown;
      let metadataField = Buffer.alloc(0);
      const types = new Map<string, Buffer>();
      const versions = new Map<number, Buffer>();
      for (const [i, e] of events.entries()) {
        if (i === 0 || e.metadata !== metadata) {
          metadata = e.metadata;
          metadataField = Buffer.concat(
            binaryJsonb(jsonText(e.metadata)).map((p) => Buffer.from(p)),
          );
        }
        let type = types.get(e.type);
        if (type === undefined) types.set(e.type, (type = binaryText(e.type)));
        let version = versions.get(e.schemaVersion);
        if (version === undefined) {
          versions.set(e.schemaVersion, (version = binaryInt4(e.schemaVersion)));
        }
        yield [
          ids.subarray(16 * i, 16 * i + 16),
          stream,
          revisions.subarray(8 * i, 8 * i + 8),
          type,
          version,
          jsonText(e.data),
          metadataField,
          transaction,
        ];
      }
    })(),
  );
  const positions = await copiedPositions(tx, streamId, first, length);
  if (positions?.length !== events.length) {
    throw new Error(`COPY of ${events.length} events into ${streamId} wrote ${positions?.length}`);
  }
  let last = positions[0];
  for (const p of positions) if (p > last) last = p;
  return {
    result: {
      nextExpectedRevision: length - 1n,
      position: { transactionId: BigInt(txid), globalPosition: last },
    },
    positions,
  };
}

/**
 * Each copied row's position, in revision order: for the events held in
 * memory. The rows took theirs from the sequence one after another, in
 * order, so the first row's and the session's last one (`currval`) bound
 * them; when nothing else took a position in between (the usual case: the
 * bounds are exactly as far apart as there are rows) they are that range,
 * found without reading the rows back (a scan of 20,000 rows, about 30 ms
 * on the chain a first commit's answer waits for). Otherwise they are read.
 */
async function copiedPositions(
  tx: PoolClient,
  streamId: string,
  first: bigint,
  length: bigint,
): Promise<bigint[]> {
  const count = Number(length - first);
  const { rows } = await tx.query<{ first: string | null; last: string }>(
    `SELECT (SELECT global_position FROM kl_events
              WHERE stream_id = $1 AND stream_revision = $2) AS first,
            currval(pg_get_serial_sequence('kl_events', 'global_position')) AS last`,
    [streamId, first.toString()],
  );
  const from = rows[0].first === null ? null : BigInt(rows[0].first);
  if (from !== null && BigInt(rows[0].last) - from + 1n === BigInt(count)) {
    return Array.from({ length: count }, (_, i) => from + BigInt(i));
  }
  const written = await tx.query<{ positions: string[] }>(
    `SELECT array_agg(global_position ORDER BY stream_revision) AS positions FROM kl_events
      WHERE stream_id = $1 AND stream_revision >= $2 AND stream_revision < $3`,
    [streamId, first.toString(), length.toString()],
  );
  return (written.rows[0].positions ?? []).map((p) => BigInt(p));
}

/**
 * A uuid's 16 bytes written at `at` in `into`, from its canonical text
 * (checkEventIds has checked it): one pass over its hex digits, where
 * Buffer#write takes a call per group and Buffer.from a buffer per id.
 */
function uuidBytes(id: string, into: Buffer, at: number): void {
  let byte = at;
  for (let i = 0; i < id.length; i++) {
    if (id.charCodeAt(i) === 0x2d) continue; // '-'
    into[byte++] = (hexDigit(id.charCodeAt(i)) << 4) | hexDigit(id.charCodeAt(++i));
  }
}

function hexDigit(code: number): number {
  // '0'-'9', then 'A'-'F' and 'a'-'f' (bit 0x20 folds the case)
  return code <= 0x39 ? code - 0x30 : (code | 0x20) - 0x57;
}

/** Ids are the writer's: refuse a malformed or repeated one before touching the store. */
function checkEventIds(events: EventToAppend[]): void {
  const seen = new Set<string>();
  for (const e of events) {
    if (typeof e.eventId !== 'string' || !UUID.test(e.eventId)) {
      throw new TypeError(`event id must be a uuid, got ${JSON.stringify(e.eventId)}`);
    }
    const id = e.eventId.toLowerCase();
    if (seen.has(id)) throw new TypeError(`event id ${id} appears twice in one append`);
    seen.add(id);
    if (!Number.isInteger(e.schemaVersion) || e.schemaVersion < 1) {
      throw new TypeError(`schema version must be a positive integer, got ${e.schemaVersion}`);
    }
  }
}

function isEventIdViolation(err: unknown): boolean {
  const e = err as { code?: unknown; constraint?: unknown } | null;
  return e?.code === '23505' && e.constraint === EVENT_ID_INDEX;
}

function jsonLines(values: unknown[]): string {
  return values.map(jsonText).join('\n');
}

function jsonText(value: unknown): string {
  const text = JSON.stringify(value);
  // Only a value JSON cannot spell (undefined, a function) has no text.
  if (text === undefined) throw new TypeError('event data and metadata must be JSON values');
  return text;
}

/**
 * Moves the stream's length forward by `count` iff the expectation holds, and
 * returns the new length. The row lock taken here serialises writers of one
 * stream; a loser re-evaluates the condition after the winner commits.
 */
async function advanceStream(
  tx: PoolClient,
  streamId: string,
  count: bigint,
  expected: ExpectedRevision,
  alsoAt?: StreamRevision,
): Promise<bigint> {
  const { sql, params } = advanceStatement(streamId, count, expected, alsoAt);
  const { rows } = await tx.query<{ length: string }>(sql, params);
  if (rows.length === 1) return BigInt(rows[0].length);
  throw await wrongRevision(tx, streamId, expected, alsoAt);
}

/**
 * The statement that moves the stream's length (advanceStream), returning
 * the new length, or no row when the expectation does not hold. Parameters:
 * $1 the stream, $2 the count, then the expected length (an expected
 * revision) and `alsoAt`'s stream and length (null: no such stream). The
 * other stream is read in the statement's snapshot, without a lock: an
 * append to it that commits meanwhile is ordered after this one, as if it
 * had come later.
 */
function advanceStatement(
  streamId: string,
  count: bigint,
  expected: ExpectedRevision,
  alsoAt?: StreamRevision,
): { sql: string; params: (string | null)[] } {
  const params: (string | null)[] = [streamId, count.toString()];
  if (typeof expected === 'bigint') params.push((expected + 1n).toString());
  let also = 'true';
  if (alsoAt) {
    params.push(
      alsoAt.streamId,
      alsoAt.revision === null ? null : (alsoAt.revision + 1n).toString(),
    );
    also = `(SELECT length FROM kl_streams WHERE stream_id = $${params.length - 1})
              IS NOT DISTINCT FROM $${params.length}::bigint`;
  }
  if (expected === 'no_stream') {
    return {
      sql: `INSERT INTO kl_streams (stream_id, length) SELECT $1, $2::bigint WHERE ${also}
            ON CONFLICT (stream_id) DO NOTHING RETURNING length`,
      params,
    };
  }
  if (expected === 'any') {
    return {
      sql: `INSERT INTO kl_streams (stream_id, length) SELECT $1, $2::bigint WHERE ${also}
            ON CONFLICT (stream_id) DO UPDATE
              SET length = kl_streams.length + EXCLUDED.length, updated_at = now()
            RETURNING length`,
      params,
    };
  }
  if (expected === 'stream_exists') {
    return {
      sql: `UPDATE kl_streams SET length = length + $2::bigint, updated_at = now()
             WHERE stream_id = $1 AND ${also} RETURNING length`,
      params,
    };
  }
  return {
    sql: `UPDATE kl_streams SET length = length + $2::bigint, updated_at = now()
           WHERE stream_id = $1 AND length = $3::bigint AND ${also} RETURNING length`,
    params,
  };
}

/**
 * The error for an append whose expectation did not hold: with the stream's
 * actual revision, or, when the stream was where expected, `alsoAt`'s.
 */
async function wrongRevision(
  q: Queryable,
  streamId: string,
  expected: ExpectedRevision,
  alsoAt?: StreamRevision,
): Promise<WrongExpectedRevisionError> {
  const { rows } = await q.query<{ stream_id: string; length: string }>(
    'SELECT stream_id, length FROM kl_streams WHERE stream_id = ANY($1)',
    [alsoAt ? [streamId, alsoAt.streamId] : [streamId]],
  );
  const revisionOf = (id: string): bigint | null => {
    const row = rows.find((r) => r.stream_id === id);
    return row ? BigInt(row.length) - 1n : null;
  };
  const actual = revisionOf(streamId);
  const text = (r: bigint | null) => (r === null ? 'no_stream' : r.toString());
  if (alsoAt && revisionOf(alsoAt.streamId) !== alsoAt.revision && holds(expected, actual)) {
    const other = revisionOf(alsoAt.streamId);
    return new WrongExpectedRevisionError(alsoAt.streamId, text(alsoAt.revision), text(other));
  }
  return new WrongExpectedRevisionError(streamId, String(expected), text(actual));
}

/** Whether a stream at `actual` (null: none) meets the expectation. */
function holds(expected: ExpectedRevision, actual: bigint | null): boolean {
  if (expected === 'any') return true;
  if (expected === 'no_stream') return actual === null;
  if (expected === 'stream_exists') return actual !== null;
  return actual === expected;
}
