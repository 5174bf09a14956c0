import Table from 'cli-table3';
import { bigNumberText, isBigNumber, stringifyJson } from '../domain/terraform/lossless-json';
import { terminalSafeJson, visible } from './terminal-text';

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
 * non-string value is written as JSON; null is an empty cell. Control
 * characters are spelled out in a table, and in csv written to a terminal
 * (terminal-text.ts).
 */
export function render(
  data: Rows,
  format: Format,
  terminal = process.stdout.isTTY === true,
): string {
  switch (format) {
    case 'json':
      return renderJson(data.rows.map((row) => rowObject(data.columns, row)));
    case 'csv': {
      const field = terminal ? (v: string) => csvField(visible(v)) : csvField;
      return [data.columns, ...data.rows.map((r) => r.map(cell))]
        .map((r) => r.map(field).join(',') + '\r\n')
        .join('');
    }
    case 'table': {
      const table = new Table({
        head: data.columns.map(visible),
        // No colours: output is often piped or captured, and must diff cleanly.
        style: { head: [], border: [] },
        // Compact: no rule between rows, so long listings stay readable.
        chars: { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' },
      });
      for (const row of data.rows) table.push(row.map((v) => visible(cell(v))));
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
 * losslessly) written back exactly as they came; control characters as
 * `\uXXXX` escapes, so the same JSON is safe on a terminal.
 */
export function renderJson(value: unknown): string {
  return terminalSafeJson(stringifyJson(value, 2)) + '\n';
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
