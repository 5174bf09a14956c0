/**
 * Events and commands are plain data: `{ type, data, metadata }`. The type
 * string is part of the public log format, so it is always written literally
 * and never derived from a class name.
 */
export interface EventMetadata {
  actor: string;
  correlationId: string;
  causationId: string | null;
  occurredAt: string; // ISO-8601, taken from the command, never from a clock here
  /** Only on events an archive import recreated: where they came from. */
  imported?: ImportProvenance;
}

/**
 * An imported event keeps the original's actor and time (its history); this
 * says which event it recreates (the first original, through repeated
 * imports), and who imported it when, from which archive.
 */
export interface ImportProvenance {
  eventId: string;
  stream: string;
  position: string;
  archive: string;
  importedAt: string;
  importedBy: string;
}

export interface DomainEvent<Type extends string = string, Data = unknown> {
  type: Type;
  data: Data;
}

/**
 * Version of the shape of an event's `data`, stored with every event. Every
 * type is at 1 so far; a type whose data changes incompatibly is written at
 * the next version, and its readers upcast the older shapes.
 */
export const EVENT_SCHEMA_VERSION = 1;

/** An event as it sits in the store, with its stream and global coordinates. */
export interface RecordedEvent<E extends DomainEvent = DomainEvent> {
  /** Given by the writer (a uuid): consumers deduplicate on it. */
  eventId: string;
  type: E['type'];
  schemaVersion: number;
  data: E['data'];
  metadata: EventMetadata;
  streamId: string;
  /** 0-based position of the event within its stream. */
  streamRevision: bigint;
  position: LogPosition;
}

/**
 * An event read for delivery to consumers (EventStore.readLog, subscribe).
 * While no upcaster changed its data, `dataJson` is that data's JSON text as
 * it was stored, and `data` is only parsed from it if something asks for it:
 * a transport passes the text on instead of parsing and re-encoding it.
 */
export type LoggedEvent = RecordedEvent & { readonly dataJson?: string };

/**
 * Where an event sits in the global log. Order is by transaction id, then
 * global position: a plain sequence number would let a reader skip an event
 * whose transaction took its number early but committed late.
 */
export interface LogPosition {
  transactionId: bigint;
  globalPosition: bigint;
}

export const LOG_START: LogPosition = { transactionId: 0n, globalPosition: 0n };

export function comparePositions(a: LogPosition, b: LogPosition): number {
  if (a.transactionId !== b.transactionId) return a.transactionId < b.transactionId ? -1 : 1;
  if (a.globalPosition !== b.globalPosition) return a.globalPosition < b.globalPosition ? -1 : 1;
  return 0;
}

/** Who asked, when, and as part of what: the command's share of event metadata. */
export interface CommandContext {
  actor: string;
  correlationId: string;
  causationId?: string | null;
  now: string; // ISO-8601
}

export function metadataFor(ctx: CommandContext): EventMetadata {
  return {
    actor: ctx.actor,
    correlationId: ctx.correlationId,
    causationId: ctx.causationId ?? null,
    occurredAt: ctx.now,
  };
}
