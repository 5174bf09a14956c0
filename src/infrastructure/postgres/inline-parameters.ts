import { escapeLiteral } from 'pg';

// node-postgres' own conversion of a parameter to the text it sends for it.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { prepareValue } = require('pg/lib/utils') as { prepareValue: (v: unknown) => unknown };

/**
 * One statement's text with its parameters written in as literals, for a
 * query of several statements (the simple protocol takes no parameters):
 * each `$n` becomes the quoted text node-postgres would have sent for it
 * (`prepareValue`), a literal of unknown type resolved from its context as
 * the parameter was, a Buffer its hex form, null `NULL`. Null when the text
 * is not one this can do safely: it holds a `;` (several statements), a
 * comment, a dollar-quoted or backslash-escaped string, a `$` other than a
 * parameter, or a parameter not given; or a value holds a NUL (the query's
 * text ends there); or the literals come to more than `maxBytes` characters.
 */
export function inlineParameters(
  text: string,
  values: readonly unknown[],
  maxBytes = Infinity,
): string | null {
  const literals: string[] = [];
  let length = 0;
  for (const value of values) {
    const literal = literalOf(value, maxBytes - length);
    if (literal === null) return null;
    length += literal.length;
    if (length > maxBytes) return null;
    literals.push(literal);
  }
  let out = '';
  let from = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "'" || c === '"') {
      // A quoted string or name: the next lone quote ends it ('' and "" stay inside).
      const end = closing(text, i, c);
      if (end < 0) return null;
      // E'…' reads backslashes: not scanned here.
      if (c === "'" && i > 0 && /[eE]/.test(text[i - 1]) && !/\w/.test(text[i - 2] ?? ' ')) {
        return null;
      }
      i = end;
    } else if (
      c === ';' ||
      (c === '-' && text[i + 1] === '-') ||
      (c === '/' && text[i + 1] === '*')
    ) {
      return null;
    } else if (c === '$') {
      const digits = /^\d+/.exec(text.slice(i + 1, i + 8));
      if (digits === null || /\w/.test(text[i - 1] ?? ' ')) return null;
      const n = Number(digits[0]);
      if (n < 1 || n > literals.length) return null;
      out += text.slice(from, i) + literals[n - 1];
      i += digits[0].length;
      from = i + 1;
    }
  }
  return out + text.slice(from);
}

/** Where the string or name opened by `quote` at `at` ends; -1 if it does not. */
function closing(text: string, at: number, quote: string): number {
  for (let i = at + 1; i < text.length; i++) {
    if (text[i] !== quote) continue;
    if (text[i + 1] === quote) i++;
    else return i;
  }
  return -1;
}

/** The literal of `value`, or null when it cannot be one or is longer than `room` (roughly). */
function literalOf(value: unknown, room: number): string | null {
  // Too big already by its strings: not converted (a document's chunks), only to be sent alone.
  if (lowerSize(value) > room) return null;
  const prepared = prepareValue(value);
  if (prepared === null) return 'NULL';
  if (Buffer.isBuffer(prepared)) {
    return prepared.length * 2 > room ? null : `'\\x${prepared.toString('hex')}'`;
  }
  if (typeof prepared !== 'string' || prepared.length > room || prepared.includes('\0')) {
    return null;
  }
  return escapeLiteral(prepared);
}

/** At least how long a value's text is: its strings' and buffers' lengths, arrays' elements summed. */
function lowerSize(value: unknown): number {
  if (typeof value === 'string') return value.length;
  if (Buffer.isBuffer(value)) return value.length * 2;
  if (!Array.isArray(value)) return 0;
  let size = 0;
  for (const element of value) size += lowerSize(element);
  return size;
}
