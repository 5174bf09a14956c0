import type {
  DomainEvent,
  EventMetadata,
  LogPosition,
  RecordedEvent,
} from '../../domain/shared/event';

export const EVENT_STORE = Symbol('EventStore');

/**
 * What the writer believes about the stream. `no_stream`: it must not exist;
 * `stream_exists`: it must exist; a bigint: its last event has this revision
 * (0-based); `any`: no check.
 */
export type ExpectedRevision = 'no_stream' | 'stream_exists' | 'any' | bigint;

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

export interface ReadStreamOptions {
  /** First revision to read (inclusive); default 0. */
  fromRevision?: bigint;
  maxCount?: number;
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
   * batch is not such a repeat), and EventIdConflictError when an event id of
   * the batch is already stored as anything else: another stream, another
   * revision, other content, or only part of the batch.
   */
  appendToStream(
    streamId: string,
    events: EventToAppend[],
    options: { expectedRevision: ExpectedRevision },
  ): Promise<AppendResult>;
  readStream(streamId: string, options?: ReadStreamOptions): Promise<RecordedEvent[]>;
  /** Events strictly after `from` in log order, committed ones only. */
  readAll(from: LogPosition, limit: number): Promise<RecordedEvent[]>;
  /** Catch-up from `from`, then live. Ends when `signal` aborts. */
  subscribe(from: LogPosition, signal: AbortSignal): AsyncIterable<RecordedEvent>;
}
