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
// A double holds every decimal of up to 15 significant digits whose exponent
// has at most two digits, so only a number with 16+ digits or a 3-digit
// exponent can lose precision. The test looks at number positions only (the
// start, or after `:` `[` `,`): hex ids and uuids are full of digit runs and
// "e123" inside strings, and would send nearly every state down the slow path.
const MAYBE_UNSAFE =
  /(?:^|[:,[])[ \t\n\r]*-?(?:(?:\d\.?){16}|\d[\d.]*[eE][+-]?\d{3})/;

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

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const MINUS = 0x2d;

function markUnsafeNumbers(text: string): string {
  let out = '';
  let last = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i = closingQuote(text, i);
      continue;
    }
    if (c !== MINUS && !isDigit(c)) continue;
    // Outside strings, valid JSON has digits and '-' only in numbers.
    let j = i + 1;
    let digits = c === MINUS ? 0 : 1;
    let exponentDigits = -1; // -1: no exponent
    for (; j < n; j++) {
      const d = text.charCodeAt(j);
      if (isDigit(d)) {
        if (exponentDigits < 0) digits++;
        else exponentDigits++;
      } else if (d === 0x65 /* e */ || d === 0x45 /* E */) {
        exponentDigits = 0;
      } else if (d !== 0x2e /* . */ && d !== 0x2b /* + */ && d !== MINUS) {
        break;
      }
    }
    if (digits >= 16 || exponentDigits >= 3) {
      const token = text.slice(i, j);
      if (!sameNumber(token, String(Number(token)))) {
        out += `${text.slice(last, i)}"${MARK}${token}"`;
        last = j;
      }
    }
    i = j - 1;
  }
  return last === 0 ? text : out + text.slice(last);
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

/** Index of the quote that closes the string opened at `open` (text.length if none). */
function closingQuote(text: string, open: number): number {
  let at = open;
  for (;;) {
    at = text.indexOf('"', at + 1);
    if (at < 0) return text.length;
    let backslashes = 0;
    while (text.charCodeAt(at - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return at;
  }
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
