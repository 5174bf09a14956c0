import { types } from 'pg';
import { parseJsonExact } from '../../domain/terraform/lossless-json';

/**
 * How result values become JSON. PostgreSQL's int8 and numeric cannot always
 * be JSON numbers without losing digits, so they are numbers when the number
 * reads back exactly as PostgreSQL wrote it, and strings otherwise. Times,
 * dates and intervals stay PostgreSQL's text (microseconds and zones intact);
 * bytea stays its `\x…` hex text; json/jsonb are parsed with every number
 * exact (and written exactly in the answer: see LosslessJsonExpressAdapter).
 */
export function exactNumber(text: string): number | string {
  const n = Number(text);
  if (!Number.isFinite(n)) return text;
  if (/^-?\d+$/.test(text)) return Number.isSafeInteger(n) ? n : text;
  return String(n) === canonicalDecimal(text) ? n : text;
}

/** `-001.2500` → `-1.25`: what `String(Number(x))` prints when nothing is lost. */
function canonicalDecimal(text: string): string {
  const m = /^(-?)(\d+)(?:\.(\d*))?$/.exec(text);
  if (!m) return text;
  const int = m[2].replace(/^0+(?=\d)/, '');
  const frac = (m[3] ?? '').replace(/0+$/, '');
  const body = frac ? `${int}.${frac}` : int;
  return body === '0' ? '0' : `${m[1]}${body}`;
}

const INT8 = 20;
const NUMERIC = 1700;
const INT8_ARRAY = 1016;
const NUMERIC_ARRAY = 1231;
const TEXT_ARRAY = 1009;
const JSON_OID = 114;
const JSONB = 3802;
const RAW_TEXT = new Set([
  17, // bytea
  1082, // date
  1083, // time
  1114, // timestamp
  1184, // timestamptz
  1186, // interval
  1266, // timetz
]);

type Nested = string | null | Nested[];

function mapNested(value: Nested, fn: (s: string) => unknown): unknown {
  if (value === null) return null;
  return Array.isArray(value) ? value.map((v) => mapNested(v, fn)) : fn(value);
}

// pg's typings only admit the builtin scalar type ids.
const defaultParser = types.getTypeParser as (
  oid: number,
  format: 'text' | 'binary',
) => (text: string) => unknown;

/** The `types` option of the reader pool's connections. */
export const queryTypeParsers = {
  getTypeParser(oid: number, format: 'text' | 'binary' = 'text'): (text: string) => unknown {
    if (format === 'binary') return defaultParser(oid, 'binary');
    if (oid === INT8 || oid === NUMERIC) return exactNumber;
    if (oid === INT8_ARRAY || oid === NUMERIC_ARRAY) {
      const parseTextArray = defaultParser(TEXT_ARRAY, 'text') as (t: string) => Nested;
      return (text) => mapNested(parseTextArray(text), exactNumber);
    }
    if (RAW_TEXT.has(oid)) return (text) => text;
    if (oid === JSON_OID || oid === JSONB) return parseJsonExact;
    return defaultParser(oid, 'text');
  },
};
