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
  type: E['type'];
  data: E['data'];
  metadata: EventMetadata;
}

export interface ReadStreamOptions {
  /** First revision to read (inclusive); default 0. */
  fromRevision?: bigint;
  maxCount?: number;
}

export interface EventStore {
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
