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

// Lines per write: a few hundred kilobytes for state-sized rows, so memory
// stays bounded by the stream's buffer, not by the number of rows.
const LINES_PER_WRITE = 256;

/**
 * Streams rows into `table` with `COPY … FROM STDIN` (text format) on `tx`:
 * one statement whatever the number of rows, no per-row planning, and the
 * rows are encoded as they are sent. Each row is its fields in `columns`
 * order, already in COPY text form (`copyField`). Part of the caller's
 * transaction: a failure anywhere aborts it, like any statement.
 */
export async function copyRows(
  tx: Queryable,
  table: string,
  columns: readonly string[],
  rows: Iterable<readonly string[]>,
): Promise<void> {
  const sink = tx.query(copyFrom(`COPY ${table} (${columns.join(', ')}) FROM STDIN`));
  await pipeline(Readable.from(lines(rows), { objectMode: false }), sink);
}

function* lines(rows: Iterable<readonly string[]>): Generator<string> {
  let batch = '';
  let n = 0;
  for (const row of rows) {
    batch += row.join('\t') + '\n';
    if (++n === LINES_PER_WRITE) {
      yield batch;
      batch = '';
      n = 0;
    }
  }
  if (batch) yield batch;
}
