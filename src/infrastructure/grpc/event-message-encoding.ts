import type { LoggedEvent } from '../../domain/shared/event';
import { formatCursor } from '../../domain/shared/log-cursor';
import { stringifyJson } from '../../domain/terraform/lossless-json';
import { dataJson } from '../events/event-json';

/**
 * The wire bytes of an `EventMessage` (proto/kilolock/v1/events.proto)
 * holding one `Event`, written straight from the event: the same bytes
 * protobufjs writes for that message (every field, in field order), without
 * building a message object and a writer's list of operations per field
 * first, which took most of a catch-up's CPU.
 */
export function encodeEvent(event: LoggedEvent): Buffer {
  return encode([eventFields(event)], false);
}

/** An event whose message would be larger than a client takes: nothing of it was encoded. */
export interface OversizedEvent {
  event: LoggedEvent;
  /** The bytes of the smallest message that holds it. */
  bytes: number;
}

/**
 * `events` as batch messages, in order: a batch ends before the event that
 * would take its JSON (data and metadata, in characters) past `maxJsonChars`,
 * and holds at least one event. An event that needs a message of more than
 * `maxMessageBytes` ends the batches before it: the messages are those of
 * the events before it, and `oversized` names it.
 */
export function encodeBatches(
  events: readonly LoggedEvent[],
  maxJsonChars: number,
  maxMessageBytes = Infinity,
): { messages: Buffer[]; oversized: OversizedEvent | null } {
  const out: Buffer[] = [];
  let batch: EventFields[] = [];
  let chars = 0;
  for (const event of events) {
    const f = eventFields(event);
    const alone = batchSize([f]);
    if (alone > maxMessageBytes) {
      if (batch.length > 0) out.push(encode(batch, true));
      return { messages: out, oversized: { event, bytes: alone } };
    }
    const size = f.strings[DATA]!.length + f.strings[METADATA]!.length;
    if (batch.length > 0 && chars + size > maxJsonChars) {
      out.push(encode(batch, true));
      batch = [];
      chars = 0;
    }
    batch.push(f);
    chars += size;
  }
  if (batch.length > 0) out.push(encode(batch, true));
  return { messages: out, oversized: null };
}

/** The bytes of the batch message holding `fields`. */
function batchSize(fields: readonly EventFields[]): number {
  let size = 0;
  for (const f of fields) size += 1 + varintSize(f.size) + f.size;
  return 1 + varintSize(size) + size;
}

function encode(fields: readonly EventFields[], batch: boolean): Buffer {
  let size = 0;
  for (const f of fields) size += 1 + varintSize(f.size) + f.size;
  // EventMessage.event (1) holds one Event; EventMessage.batch (4) an EventBatch
  // whose `events` (1) repeat.
  const total = batch ? 1 + varintSize(size) + size : size;
  const out = Buffer.allocUnsafe(total);
  let at = 0;
  if (batch) {
    out[at++] = tag(4, LENGTH_DELIMITED);
    at = writeVarint(out, at, size);
  }
  for (const f of fields) {
    out[at++] = tag(1, LENGTH_DELIMITED);
    at = writeVarint(out, at, f.size);
    at = writeEvent(out, at, f);
  }
  if (at !== total) throw new Error(`event message encoding: wrote ${at} of ${total} bytes`);
  return out;
}

const VARINT = 0;
const LENGTH_DELIMITED = 2;

function tag(field: number, wireType: number): number {
  return (field << 3) | wireType;
}

/** Event's fields in field order: numbers 3 and 10 are varints, the rest strings. */
interface EventFields {
  /** null: the field is left out (a metadata field an event lacks), as protobufjs leaves it. */
  strings: (string | null)[];
  lengths: number[];
  /** A number while it is exact as one (always, in practice). */
  revision: number | bigint;
  schemaVersion: number;
  size: number;
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const STRING_FIELDS = [1, 2, 4, 5, 6, 7, 8, 9, 11, 12];
// Indexes of data_json and metadata_json in EventFields.strings.
const DATA = 8;
const METADATA = 9;

function eventFields(event: LoggedEvent): EventFields {
  const { metadata } = event;
  const strings = [
    formatCursor(event.position),
    event.streamId,
    event.type,
    event.eventId,
    // Metadata written other than by kld (by SQL) may lack a field or hold a non-string.
    optionalText(metadata.occurredAt),
    optionalText(metadata.actor),
    optionalText(metadata.correlationId),
    optionalText(metadata.causationId) ?? '',
    dataJson(event),
    stringifyJson(metadata),
  ];
  const lengths = strings.map((s) => (s === null ? 0 : Buffer.byteLength(s)));
  const revision =
    event.streamRevision <= MAX_SAFE ? Number(event.streamRevision) : event.streamRevision;
  // Every tag here fits one byte.
  let size = 2 + varintSize(revision) + varintSize(event.schemaVersion);
  for (const [i, n] of lengths.entries()) if (strings[i] !== null) size += 1 + varintSize(n) + n;
  return {
    strings,
    lengths,
    revision,
    schemaVersion: event.schemaVersion,
    size,
  };
}

function writeEvent(out: Buffer, start: number, f: EventFields): number {
  let at = start;
  for (let i = 0; i < STRING_FIELDS.length; i++) {
    const field = STRING_FIELDS[i];
    // stream_revision (3) and schema_version (10) come before the string fields above them.
    if (field === 4) {
      out[at++] = tag(3, VARINT);
      at = writeVarint(out, at, f.revision);
    } else if (field === 11) {
      out[at++] = tag(10, VARINT);
      at = writeVarint(out, at, f.schemaVersion);
    }
    const text = f.strings[i];
    if (text === null) continue;
    out[at++] = tag(field, LENGTH_DELIMITED);
    at = writeVarint(out, at, f.lengths[i]);
    at += out.write(text, at);
  }
  return at;
}

function optionalText(value: unknown): string | null {
  return value === null || value === undefined ? null : String(value);
}

/** Bytes of a varint of a non-negative integer (a number up to 2^53, or a bigint). */
function varintSize(value: number | bigint): number {
  let n = 1;
  if (typeof value === 'bigint') {
    for (let v = value; v >= 0x80n; v >>= 7n) n++;
    return n;
  }
  for (let v = value; v >= 0x80; v = Math.floor(v / 0x80)) n++;
  return n;
}

function writeVarint(out: Buffer, start: number, value: number | bigint): number {
  let at = start;
  if (typeof value === 'bigint') {
    let v = value;
    for (; v >= 0x80n; v >>= 7n) out[at++] = Number(v & 0x7fn) | 0x80;
    out[at++] = Number(v);
    return at;
  }
  let v = value;
  for (; v >= 0x80; v = Math.floor(v / 0x80)) out[at++] = (v % 0x80) | 0x80;
  out[at++] = v;
  return at;
}
