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
 * form, given as pieces (a bytea value's parts need not be joined first),
 * or null for SQL NULL.
 */
export type BinaryField = Buffer | readonly Buffer[] | null;

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

// The binary format's signature, flags and header extension length.
const BINARY_HEADER = Buffer.concat([
  Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'),
  Buffer.alloc(8), // flags 0, no header extension
]);
const BINARY_TRAILER = Buffer.from([0xff, 0xff]); // a field count of -1
const NULL_FIELD = Buffer.from([0xff, 0xff, 0xff, 0xff]);

/**
 * `copyRows` in COPY's binary format, for rows that are mostly bytes (bytea):
 * the bytes travel as they are, neither escaped into text nor copied into
 * a statement's parameter buffer (which node-postgres grows by copying).
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

function* binaryWrites(
  fieldCount: number,
  rows: Iterable<readonly BinaryField[]>,
): Generator<Buffer> {
  let pieces: Buffer[] = [BINARY_HEADER];
  let size = BINARY_HEADER.length;
  const add = (piece: Buffer) => {
    pieces.push(piece);
    size += piece.length;
  };
  for (const row of rows) {
    if (row.length !== fieldCount) {
      throw new TypeError(`a row of ${row.length} fields for ${fieldCount} columns`);
    }
    const count = Buffer.allocUnsafe(2);
    count.writeInt16BE(fieldCount);
    add(count);
    for (const field of row) {
      if (field === null) {
        add(NULL_FIELD);
        continue;
      }
      const parts = Buffer.isBuffer(field) ? [field] : (field as readonly Buffer[]);
      let length = 0;
      for (const p of parts) length += p.length;
      const prefix = Buffer.allocUnsafe(4);
      prefix.writeInt32BE(length);
      add(prefix);
      for (const p of parts) add(p);
    }
    // Many rows' pieces joined into one write, not one write per piece.
    if (size >= WRITE_BYTES) {
      yield Buffer.concat(pieces, size);
      pieces = [];
      size = 0;
    }
  }
  add(BINARY_TRAILER);
  yield Buffer.concat(pieces, size);
}
