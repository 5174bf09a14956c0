import { DomainError } from '../shared/domain-error';
import { JsonValue } from './json-value';
import {
  checkJsonValue,
  findString,
  fitsNumeric,
  JsonLimitError,
  NUMERIC_RANGE_PROBLEM,
} from './json-limits';

/**
 * Terraform numbers are arbitrary precision and its state writes them in
 * full; JavaScript numbers are doubles. A number that a double cannot hold
 * exactly travels through our pipeline as a marked string and becomes a bare
 * number again wherever JSON text is produced (served documents, jsonb).
 * The marker is two private-use characters that a document may not contain.
 */
const MARK = '\uF8FE\uF8FD#';
const MARKED = new RegExp(`"${MARK}(-?(?:0|[1-9]\\d*)(?:\\.\\d+)?(?:[eE][+-]?\\d+)?)"`, 'g');
// Three-digit exponents, wherever they are; the caller checks the position.
const LONG_EXPONENT = /[0-9][eE][+-]?[0-9]{3}/g;
export function isBigNumber(value: unknown): value is string {
  return typeof value === 'string' && value.startsWith(MARK);
}

/** The decimal text of a marked number. */
export function bigNumberText(value: string): string {
  return value.slice(MARK.length);
}

/**
 * Parses JSON text keeping every number exactly, and refuses what could not
 * be stored (see json-limits): throws a SyntaxError for text that is not
 * JSON, a DomainError (a JsonLimitError naming the place) for the rest.
 */
export function parseJsonLossless(text: string): JsonValue {
  if (text.includes(MARK)) {
    throw new DomainError('STATE.INVALID', 'document contains the reserved sequence U+F8FE U+F8FD');
  }
  const marked = markedText(text);
  const value = JSON.parse(marked) as JsonValue;
  checkJsonValue(text, value);
  if (marked !== text) {
    const at = findString(value, (s) => isBigNumber(s) && !fitsNumeric(bigNumberText(s)));
    if (at !== null) throw new JsonLimitError(at, NUMERIC_RANGE_PROBLEM);
  }
  return value;
}

/**
 * Parses JSON text that was accepted before (read back from our own store,
 * or answered by kld) keeping every number exactly, as parseJsonLossless
 * does, without its checks: they are for what may be stored, and this text
 * was. A value that already holds marked numbers keeps them.
 */
export function parseJsonExact(text: string): JsonValue {
  return JSON.parse(markedText(text)) as JsonValue;
}

/**
 * The value lossless parsing gives the number spelled `text`: a plain
 * number when a double holds it (as far as JSON can tell), else the marked
 * text. For numbers that arrive in other encodings (msgpack), so that they
 * hash and compare like the same number read from a document.
 */
export function numberFromText(text: string): number | string {
  const n = Number(text);
  return sameNumber(text, String(n)) ? n : MARK + text;
}

function markedText(text: string): string {
  return mayLosePrecision(text) ? markUnsafeNumbers(text) : text;
}

/**
 * Could a number in this JSON text lose precision as a double? A double
 * holds every decimal of up to 15 significant digits whose exponent has at
 * most two digits, so only a number with 16+ mantissa digits or a 3-digit
 * exponent can. Only number positions count (the start, or after `:` `[`
 * `,`): uuids and hex ids are full of digit runs and "e123", and counting
 * those would send nearly every state down the slow path. A false "yes"
 * (such text inside a string) only costs the exact scan.
 */
function mayLosePrecision(text: string): boolean {
  const n = text.length;
  // A mantissa of 16+ digits is a run of 16+ characters of [0-9.], so it
  // covers one of every 16 positions: probing those keeps this pass far
  // cheaper than a regular expression that tries every position.
  for (let probe = 15; probe < n; probe += 16) {
    if (!isMantissa(text.charCodeAt(probe))) continue;
    let start = probe;
    while (start > 0 && isMantissa(text.charCodeAt(start - 1))) start--;
    let end = probe + 1;
    while (end < n && isMantissa(text.charCodeAt(end))) end++;
    let digits = 0;
    for (let i = start; i < end; i++) if (text.charCodeAt(i) !== DOT) digits++;
    if (digits >= 16 && atNumberPosition(text, start)) return true;
    probe = end - (end % 16) + 15 - 16; // the loop step lands on the first probe past `end`
  }
  LONG_EXPONENT.lastIndex = 0;
  for (let m = LONG_EXPONENT.exec(text); m !== null; m = LONG_EXPONENT.exec(text)) {
    let start = m.index;
    while (start > 0 && isMantissa(text.charCodeAt(start - 1))) start--;
    if (atNumberPosition(text, start)) return true;
  }
  return false;
}

/** Does the mantissa starting at `start` (after an optional '-') begin a JSON value? */
function atNumberPosition(text: string, start: number): boolean {
  let i = start - 1;
  if (i >= 0 && text.charCodeAt(i) === MINUS) i--;
  while (i >= 0 && isSpace(text.charCodeAt(i))) i--;
  if (i < 0) return true;
  const c = text.charCodeAt(i);
  return c === 0x3a /* : */ || c === 0x2c /* , */ || c === 0x5b; /* [ */
}

/** JSON text with marked numbers written back as bare numbers. */
export function stringifyJson(value: unknown, space?: number): string {
  return unmarkNumbers(JSON.stringify(value, null, space));
}

/** JSON text (as JSON.stringify wrote it) with marked numbers written back as bare numbers. */
export function unmarkNumbers(jsonText: string): string {
  return jsonText.includes(MARK) ? jsonText.replace(MARKED, '$1') : jsonText;
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
      } else if (d !== DOT && d !== 0x2b /* + */ && d !== MINUS) {
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

const DOT = 0x2e;

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

function isMantissa(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || c === DOT;
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
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
