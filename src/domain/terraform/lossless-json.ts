import { DomainError } from '../shared/domain-error';
import { JsonValue } from './json-value';

/**
 * Terraform numbers are arbitrary precision and its state writes them in
 * full; JavaScript numbers are doubles. A number that a double cannot hold
 * exactly travels through our pipeline as a marked string and becomes a bare
 * number again wherever JSON text is produced (served documents, jsonb).
 * The marker is two private-use characters that a document may not contain.
 */
const MARK = '\uF8FE\uF8FD#';
const MARKED = new RegExp(`"${MARK}(-?(?:0|[1-9]\\d*)(?:\\.\\d+)?(?:[eE][+-]?\\d+)?)"`, 'g');
// Only a run of 16+ digits or a 3-digit exponent can lose precision.
const MAYBE_UNSAFE = /\d{16}|[eE][+-]?\d{3}/;

export function isBigNumber(value: unknown): value is string {
  return typeof value === 'string' && value.startsWith(MARK);
}

/** The decimal text of a marked number. */
export function bigNumberText(value: string): string {
  return value.slice(MARK.length);
}

export function parseJsonLossless(text: string): JsonValue {
  if (text.includes(MARK)) {
    throw new DomainError('STATE.INVALID', 'document contains the reserved sequence U+F8FE U+F8FD');
  }
  if (!MAYBE_UNSAFE.test(text)) return JSON.parse(text) as JsonValue;
  return JSON.parse(markUnsafeNumbers(text)) as JsonValue;
}

/** JSON text with marked numbers written back as bare numbers. */
export function stringifyJson(value: unknown, space?: number): string {
  const text = JSON.stringify(value, null, space);
  return text.includes(MARK) ? unmarkNumbers(text) : text;
}

export function unmarkNumbers(jsonText: string): string {
  return jsonText.replace(MARKED, '$1');
}

function markUnsafeNumbers(text: string): string {
  let out = '';
  let last = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      i++;
      while (i < text.length && text.charCodeAt(i) !== 0x22) {
        if (text.charCodeAt(i) === 0x5c /* \ */) i++;
        i++;
      }
      continue;
    }
    if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39)) {
      let j = i + 1;
      while (j < text.length && /[0-9.eE+-]/.test(text[j])) j++;
      const token = text.slice(i, j);
      if (!sameNumber(token, String(Number(token)))) {
        out += `${text.slice(last, i)}"${MARK}${token}"`;
        last = j;
      }
      i = j - 1;
    }
  }
  return out + text.slice(last);
}

/** Do two decimal texts denote the same number? (Exact, by digits.) */
export function sameNumber(a: string, b: string): boolean {
  const x = normalize(a);
  const y = normalize(b);
  return x !== null && y !== null && x === y;
}

function normalize(text: string): string | null {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(text);
  if (!m) return null;
  let digits = m[2] + (m[3] ?? '');
  let exponent = Number(m[4] ?? 0) - (m[3]?.length ?? 0);
  digits = digits.replace(/^0+/, '');
  if (digits === '') return '0';
  const trailing = digits.length - digits.replace(/0+$/, '').length;
  digits = digits.slice(0, digits.length - trailing);
  exponent += trailing;
  return `${m[1]}${digits}e${exponent}`;
}
