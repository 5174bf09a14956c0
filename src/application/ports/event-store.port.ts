import type {
  DomainEvent,
  EventMetadata,
  LogPosition,
  LoggedEvent,
  RecordedEvent,
} from '../../domain/shared/event';

export const EVENT_STORE = Symbol('EventStore');
/**
 * The same log on a small pool of its own, for readers that page through
 * much of it (archive exports, event subscriptions catching up): however
 * many of them read at once, they queue for its connections, never for
 * those terraform's commands and the projectors use.
 */
export const BULK_EVENT_STORE = Symbol('BulkEventStore');

/**
 * What the writer believes about the stream. `no_stream`: it must not exist;
 * `stream_exists`: it must exist; a bigint: its last event has this revision
 * (0-based); `any`: no check.
 */
export type ExpectedRevision = 'no_stream' | 'stream_exists' | 'any' | bigint;

/**
 * Another stream's place, as a condition of an append: the append stands only
 * while that stream is still at `revision` (null: it does not exist). A
 * command decided on another aggregate's state as well as its own (a lock
 * judged by the quota rules) names where it read that state, instead of
 * reading its tail first.
 */
export interface StreamRevision {
  streamId: string;
  revision: bigint | null;
}

export interface AppendResult {
  /** Revision of the last event written: pass it as the next expectedRevision. */
  nextExpectedRevision: bigint;
  /** Log position of the last event written; read models include it once past it. */
  position: LogPosition;
}

export interface EventToAppend<E extends DomainEvent = DomainEvent> {
  /**
   * A uuid chosen by the writer, unique across the whole log. The writer
   * keeps it when it retries an append, so that the store can tell a repeat
   * from a new event.
   */
  eventId: string;
  type: E['type'];
  /** Version of the shape of `data` (EVENT_SCHEMA_VERSION when written now). */
  schemaVersion: number;
  data: E['data'];
  metadata: EventMetadata;
}

/**
 * A database session the caller holds (for the PostgreSQL store, a client
 * in a transaction of the caller's): AppendInFlight.nextAfter asks on it
 * instead of taking a connection of its own.
 */
export interface StoreSession {
  query(text: string, params?: unknown[]): Promise<unknown>;
}

/**
 * An append of more than one statement's events, announced while it is
 * being written (EventStore.watchAppends), so that a reader needing no log
 * position can start on its events before they commit.
 */
export interface AppendInFlight {
  readonly streamId: string;
  /**
   * Its events as readAll will return them once committed, but for their
   * positions, which the commit gives: each `position` is zero until then.
   */
  readonly events: readonly RecordedEvent[];
  /** The events as recorded once the append has committed; null once it has not. */
  readonly committed: Promise<readonly RecordedEvent[] | null>;
  /**
   * Asked once `committed` gave `recorded`: whether a reader at `from`
   * reads them next, but for events of other types than `types` before
   * them. `next` when no transaction can still commit an event before them
   * (readAll's horizon is past them) and no event of `types` lies between
   * `from` and them; `unsettled` while an older transaction is still open
   * (ask again); `not next` otherwise, for good. Asked through `session`,
   * never on a connection of its own.
   */
  nextAfter(
    from: LogPosition,
    recorded: readonly RecordedEvent[],
    types: readonly string[],
    session: StoreSession,
  ): Promise<'next' | 'unsettled' | 'not next'>;
}

export interface ReadStreamOptions {
  /** First revision to read (inclusive); default 0. */
  fromRevision?: bigint;
  maxCount?: number;
  /**
   * Each event's data as readLog gives it: the stored JSON text (`dataJson`),
   * parsed only if something asks for `data`. For readers that pass the
   * text on (an archive export).
   */
  dataAsText?: boolean;
}

export interface EventStore {
  /**
   * Appends `events` atomically, iff the stream is at `expectedRevision`.
   *
   * Idempotent by event id: when every event of the batch is already stored,
   * in this stream, as one earlier append (consecutive revisions starting
   * where `expectedRevision` says, when it names one) with the same type,
   * schema version, data and metadata, the call writes nothing and returns
   * what that append returned. So a writer that lost the answer to an append
   * retries it with the same ids and the same expected revision.
   *
   * Throws WrongExpectedRevisionError when the stream is elsewhere (and the
   * batch is not such a repeat), or, naming `alsoAt`'s stream, when that one
   * is not at its revision; and EventIdConflictError when an event id of
   * the batch is already stored as anything else: another stream, another
   * revision, other content, or only part of the batch.
   */
  appendToStream(
    streamId: string,
    events: EventToAppend[],
    options: { expectedRevision: ExpectedRevision; alsoAt?: StreamRevision },
  ): Promise<AppendResult>;
  readStream(streamId: string, options?: ReadStreamOptions): Promise<LoggedEvent[]>;
  /**
   * Up to `limit` events strictly after `from`, in log order, committed ones
   * only, and never one that a concurrent writer could still commit behind
   * a position already returned: a reader that goes on from the last event
   * it got skips nothing. With `types`, events of other types come without
   * their data (`data` null), so a reader still moves past them.
   */
  readAll(from: LogPosition, limit: number, types?: readonly string[]): Promise<RecordedEvent[]>;
  /**
   * readAll for delivery to consumers: the same events, each with its data
   * still as stored JSON text (`dataJson`) unless an upcaster changed it.
   */
  readLog(from: LogPosition, limit: number): Promise<LoggedEvent[]>;
  /**
   * What `readAll(from, limit, types)` returns, taken from memory when the
   * next events after `from` are those of an append this process committed
   * lately: the projectors of the writer's own process need not read back
   * what it just wrote. Only the held appends that follow one another from
   * `from`, so maybe fewer than `limit` while more follow. Null when memory
   * cannot answer (nothing held there, or the append is not yet the log's
   * next): then read.
   */
  readAppended(
    from: LogPosition,
    limit: number,
    types?: readonly string[],
  ): Promise<RecordedEvent[] | null>;
  /**
   * Every event of the append this process committed in `transactionId` (an
   * append is one transaction), with their data, while it holds them in
   * memory; null otherwise.
   */
  heldAppend(transactionId: bigint): readonly RecordedEvent[] | null;
  /** The readers of this process's held appends are past `position`: those up to it may go. */
  releaseAppends(position: LogPosition): void;
  /**
   * Calls `listener` for each append of this process that writes more than
   * one statement's events, once the stream has moved (the append got past
   * its expected revision) and before its events are written; synchronously,
   * so the listener must only start its work. Returns the way to stop.
   */
  watchAppends(listener: (append: AppendInFlight) => void): () => void;
  /** The event at this global position (`event_log.position`), or null. */
  readAt(globalPosition: bigint): Promise<RecordedEvent | null>;
  /** Position of the last event `readAll` would return now; null for an empty log. */
  lastPosition(): Promise<LogPosition | null>;
  /**
   * Position of the last event committed, which `readAll` may not return
   * yet (an older transaction still open holds it behind the horizon);
   * null for an empty log.
   */
  headPosition(): Promise<LogPosition | null>;
  /**
   * Resolves when events may have been appended (by any process), after
   * `timeoutMs` at the latest, or when `signal` aborts: a hint to read
   * again, never a promise that there is something new. With `since` (an
   * `appendMark` taken before the reader's last read) it resolves at once if
   * an append was signalled since then.
   */
  waitForAppend(timeoutMs: number, signal?: AbortSignal, since?: number): Promise<void>;
  /** Counts the append signals received so far: for `waitForAppend`'s `since`. */
  appendMark(): number;
  /** Whether an event of this log sits at `position` (a cursor from elsewhere does not). */
  contains(position: LogPosition): Promise<boolean>;
  /** Catch-up from `from`, then live, as readLog reads. Ends when `signal` aborts. */
  subscribe(from: LogPosition, signal: AbortSignal): AsyncIterable<LoggedEvent>;
}
