import Table from 'cli-table3';
import { bigNumberText, isBigNumber, stringifyJson } from '../domain/terraform/lossless-json';

export type Format = 'table' | 'json' | 'csv';

/** What every listing command produces; `render` turns it into the chosen format. */
export interface Rows {
  columns: string[];
  rows: unknown[][];
}

/**
 * table: a cli-table3 grid for people; json: an array of row objects keyed by
 * column name, values as they came; csv: RFC 4180 (CRLF, quoted when needed).
 * In table and csv a list of strings is joined with ", " and any other
 * non-string value is written as JSON; null is an empty cell.
 */
export function render(data: Rows, format: Format): string {
  switch (format) {
    case 'json':
      return renderJson(data.rows.map((row) => rowObject(data.columns, row)));
    case 'csv':
      return [data.columns, ...data.rows.map((r) => r.map(cell))]
        .map((r) => r.map(csvField).join(',') + '\r\n')
        .join('');
    case 'table': {
      const table = new Table({
        head: data.columns,
        // No colours: output is often piped or captured, and must diff cleanly.
        style: { head: [], border: [] },
        // Compact: no rule between rows, so long listings stay readable.
        chars: { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' },
      });
      for (const row of data.rows) table.push(row.map(cell));
      return table.toString() + '\n';
    }
    default: {
      const never: never = format;
      throw new Error(`unknown format ${String(never)}`);
    }
  }
}

/**
 * JSON for one value, indented; numbers beyond double precision (parsed
 * losslessly) written back exactly as they came.
 */
export function renderJson(value: unknown): string {
  return stringifyJson(value, 2) + '\n';
}

function rowObject(columns: string[], row: unknown[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  columns.forEach((c, i) => (out[c] = row[i] ?? null));
  return out;
}

function cell(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (isBigNumber(value)) return bigNumberText(value);
  if (typeof value === 'string') return value;
  if (Array.isArray(value) && value.every((v) => typeof v === 'string' && !isBigNumber(v))) {
    return value.join(', ');
  }
  return typeof value === 'object' ? stringifyJson(value) : String(value);
}

function csvField(value: string): string {
  return /[",\r\n]/.test(value) ? `"${value.replace(/"/g, '""')}"` : value;
}
