import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { from as copyFrom } from 'pg-copy-streams';
import type { Queryable } from './database';

// Characters COPY's text format gives a meaning: its escape, and the row and
// column separators. JSON text has only the first (JSON.stringify escapes
// control characters), plain text may have all of them.
const COPY_SPECIAL = /[\\\n\r\t]/g;
const COPY_ESCAPES: Record<string, string> = {
  '\\': '\\\\',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
};

/** One value as a field of COPY's text format; null is SQL NULL. */
export function copyField(value: string | null): string {
  if (value === null) return '\\N';
  COPY_SPECIAL.lastIndex = 0;
  return COPY_SPECIAL.test(value) ? value.replace(COPY_SPECIAL, (c) => COPY_ESCAPES[c]) : value;
}

/**
 * JSON text as JSON.stringify writes it (or jsonbText) as a field of COPY's
 * text format: it holds no raw control character (those are escaped), so
 * only its backslashes need doubling; a plain replace, no pattern per
 * character, for the megabytes a first commit sends.
 */
export function copyJsonField(json: string): string {
  return json.includes('\\') ? json.replaceAll('\\', '\\\\') : json;
}

// Bytes per write: a few hundred kilobytes, so memory stays bounded by the
// stream's buffer, not by the number of rows.
const WRITE_BYTES = 256 * 1024;

/**
 * Streams rows into `table` with `COPY … FROM STDIN` (text format) on `tx`:
 * one statement whatever the number of rows, no per-row planning, and the
 * rows are encoded as they are sent. Each row is its fields in `columns`
 * order, already in COPY text form (`copyField`). Part of the caller's
 * transaction: a failure anywhere aborts it, like any statement. `first`, a
 * statement without results (a SAVEPOINT), is sent in the same query, ahead
 * of the COPY: one round trip for both.
 */
export async function copyRows(
  tx: Queryable,
  table: string,
  columns: readonly string[],
  rows: Iterable<readonly string[]>,
  first?: string,
): Promise<void> {
  await copyIn(tx, `COPY ${table} (${columns.join(', ')}) FROM STDIN`, lines(rows), first);
}

/**
 * Sends `copy` (a `COPY … FROM STDIN`) and streams `data` into it. `first`
 * goes ahead of it in the same simple query: PostgreSQL runs it first, in
 * the same transaction, and pg-copy-streams passes over its completion to
 * the COPY's.
 */
async function copyIn(
  tx: Queryable,
  copy: string,
  data: Iterable<Buffer>,
  first: string | undefined,
): Promise<void> {
  const sink = tx.query(copyFrom(first === undefined ? copy : `${first}; ${copy}`));
  await pipeline(Readable.from(data, { objectMode: false }), sink);
}

/**
 * The rows' lines, encoded into buffers of about WRITE_BYTES: each line is
 * written straight into its buffer as UTF-8, where joining lines into a
 * string would copy them once more and the stream would then encode it.
 */
function* lines(rows: Iterable<readonly string[]>): Generator<Buffer> {
  let buffer = Buffer.allocUnsafeSlow(WRITE_BYTES);
  let used = 0;
  for (const row of rows) {
    const line = row.join('\t');
    // At most 3 bytes of UTF-8 per UTF-16 unit, and the newline.
    const most = 3 * line.length + 1;
    if (buffer.length - used < most) {
      if (used > 0) yield buffer.subarray(0, used);
      buffer = Buffer.allocUnsafeSlow(Math.max(WRITE_BYTES, most));
      used = 0;
    }
    used += buffer.write(line, used, 'utf8');
    buffer[used++] = 0x0a;
  }
  if (used > 0) yield buffer.subarray(0, used);
}

/**
 * A field of COPY's binary format: its bytes in the column type's binary
 * form, given as pieces (a bytea value's parts need not be joined first; a
 * string is its UTF-8 bytes, written straight into the stream's buffer), or
 * null for SQL NULL.
 */
export type BinaryField = Buffer | string | readonly (Buffer | string)[] | null;

/** A text value in binary form (its UTF-8 bytes). */
export function binaryText(value: string): Buffer {
  return Buffer.from(value, 'utf8');
}

/** A uuid value in binary form: its 16 bytes. */
export function binaryUuid(value: string): Buffer {
  const hex = value.replaceAll('-', '');
  if (!/^[0-9a-fA-F]{32}$/.test(hex)) throw new TypeError(`not a uuid: ${value}`);
  return Buffer.from(hex, 'hex');
}

const INT4_MIN = -(2 ** 31);
const INT4_MAX = 2 ** 31 - 1;
const INT8_MIN = -(2n ** 63n);
const INT8_MAX = 2n ** 63n - 1n;

/** An integer value in binary form: 4 bytes, big-endian. */
export function binaryInt4(value: number | bigint): Buffer {
  const n = Number(value);
  if (!Number.isInteger(n) || n < INT4_MIN || n > INT4_MAX) {
    throw new TypeError(`not an integer: ${value}`);
  }
  const b = Buffer.allocUnsafe(4);
  b.writeInt32BE(n);
  return b;
}

/** A bigint value in binary form: 8 bytes, big-endian. */
export function binaryInt8(value: number | bigint): Buffer {
  if (typeof value === 'number' && !Number.isSafeInteger(value)) {
    throw new TypeError(`not a bigint: ${value}`);
  }
  const n = BigInt(value);
  if (n < INT8_MIN || n > INT8_MAX) throw new TypeError(`not a bigint: ${value}`);
  const b = Buffer.allocUnsafe(8);
  b.writeBigInt64BE(n);
  return b;
}

const TRUE = Buffer.from([1]);
const FALSE = Buffer.from([0]);

/** A boolean value in binary form: one byte. */
export function binaryBool(value: boolean): Buffer {
  return value ? TRUE : FALSE;
}

const JSONB_VERSION = Buffer.from([1]);

/**
 * JSON text as a jsonb field (json's binary form is the text alone): the
 * format version, 1, then the text, which PostgreSQL parses as it would the
 * same text in COPY's text format. Two pieces, written one after the other:
 * the text is not copied into a new string first.
 */
export function binaryJsonb(json: string): readonly [Buffer, string] {
  return [JSONB_VERSION, json];
}

// The binary format's signature, flags and header extension length.
const BINARY_HEADER = Buffer.concat([
  Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'),
  Buffer.alloc(8), // flags 0, no header extension
]);

/**
 * `copyRows` in COPY's binary format: the bytes travel as they are (bytea
 * neither escaped into text nor copied into a statement's parameter buffer,
 * which node-postgres grows by copying), and PostgreSQL reads each field by
 * its length instead of scanning every byte of the text for separators and
 * escapes.
 */
export async function copyBinaryRows(
  tx: Queryable,
  table: string,
  columns: readonly string[],
  rows: Iterable<readonly BinaryField[]>,
  first?: string,
): Promise<void> {
  await copyIn(
    tx,
    `COPY ${table} (${columns.join(', ')}) FROM STDIN (FORMAT binary)`,
    binaryWrites(columns.length, rows),
    first,
  );
}

/** The most bytes a field takes: at most 3 bytes of UTF-8 per UTF-16 unit of a string. */
function mostBytes(piece: Buffer | string): number {
  return typeof piece === 'string' ? 3 * piece.length : piece.length;
}

/**
 * The rows in COPY's binary format, written into buffers of about
 * WRITE_BYTES: each field's length, then its pieces, strings encoded in
 * place (as `lines` does for the text format).
 */
function* binaryWrites(
  fieldCount: number,
  rows: Iterable<readonly BinaryField[]>,
): Generator<Buffer> {
  let chunk = Buffer.allocUnsafeSlow(WRITE_BYTES);
  let used = BINARY_HEADER.copy(chunk, 0);
  const write = (piece: Buffer | string, at: number) => {
    if (typeof piece === 'string') return chunk.write(piece, at, 'utf8');
    chunk.set(piece, at);
    return piece.length;
  };
  for (const row of rows) {
    if (row.length !== fieldCount) {
      throw new TypeError(`a row of ${row.length} fields for ${fieldCount} columns`);
    }
    let most = 2;
    for (const field of row) {
      most += 4;
      if (field === null) continue;
      if (typeof field === 'string' || Buffer.isBuffer(field)) most += mostBytes(field);
      else for (const p of field as readonly (Buffer | string)[]) most += mostBytes(p);
    }
    if (chunk.length - used < most) {
      if (used > 0) yield chunk.subarray(0, used);
      chunk = Buffer.allocUnsafeSlow(Math.max(WRITE_BYTES, most));
      used = 0;
    }
    used = chunk.writeInt16BE(fieldCount, used);
    for (const field of row) {
      if (field === null) {
        used = chunk.writeInt32BE(-1, used);
        continue;
      }
      let end = used + 4;
      if (typeof field === 'string' || Buffer.isBuffer(field)) end += write(field, end);
      else for (const p of field as readonly (Buffer | string)[]) end += write(p, end);
      chunk.writeInt32BE(end - used - 4, used);
      used = end;
    }
  }
  if (chunk.length - used < 2) {
    yield chunk.subarray(0, used);
    chunk = Buffer.allocUnsafeSlow(2);
    used = 0;
  }
  used = chunk.writeInt16BE(-1, used); // the trailer: a field count of -1
  yield chunk.subarray(0, used);
}
