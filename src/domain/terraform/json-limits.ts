import { DomainError } from '../shared/domain-error';
import { hasLoneSurrogate } from '../shared/storable-text';
import { jsonPath } from './json-value';

/**
 * Limits every JSON body must respect so that each value in it can be stored
 * and projected: walking a value recurses once per level (here and in
 * PostgreSQL, whose jsonb parser gives up near 20,000 levels, JSON.stringify
 * near 4,000), and terraform's own decoder stops at 10,000. Real states nest
 * a few dozen levels.
 */
export const MAX_JSON_DEPTH = 1000;

/** PostgreSQL numeric (and so jsonb) holds at most this many digits on either side of the point. */
const NUMERIC_INTEGER_DIGITS = 131_072;
const NUMERIC_FRACTION_DIGITS = 16_383;

/**
 * A JSON value that is valid JSON but cannot be stored. `path` names the
 * place (a jsonPath, '' for the value itself), `problem` ends the sentence.
 */
export class JsonLimitError extends DomainError {
  constructor(
    public readonly path: string,
    public readonly problem: string,
  ) {
    super('STATE.INVALID', `${path === '' ? 'value' : path} ${problem}`, { path });
    this.name = 'JsonLimitError';
  }
}

// A \uD800–\uDFFF escape: the only way a lone surrogate gets into a value
// parsed from well-formed UTF-8.
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

/**
 * Checks a value parsed from `text` (JSON.parse itself copes with any
 * depth): it nests at most MAX_JSON_DEPTH levels, and no string or member
 * name holds a lone surrogate.
 */
export function checkJsonValue(text: string, value: unknown): void {
  if (deeperThan(value, MAX_JSON_DEPTH)) {
    throw new JsonLimitError('', `nests deeper than ${MAX_JSON_DEPTH} levels`);
  }
  if (!SURROGATE_ESCAPE.test(text)) return;
  const at = findString(value, hasLoneSurrogate);
  if (at !== null) throw new JsonLimitError(at, 'holds an unpaired UTF-16 surrogate');
}

/** Does `value` nest more than `max` levels? Safe on any depth. */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  return deeperThan(value, max);
}

/** Recursion stops at `max`, so this walk is safe on any depth. */
function deeperThan(value: unknown, max: number, depth = 0): boolean {
  if (typeof value !== 'object' || value === null) return false;
  if (depth === max) return true;
  if (Array.isArray(value)) {
    for (const v of value) if (deeperThan(v, max, depth + 1)) return true;
    return false;
  }
  for (const key in value) {
    if (deeperThan((value as Record<string, unknown>)[key], max, depth + 1)) return true;
  }
  return false;
}

/**
 * Path of the first string (value or member name) that matches; '' is the
 * value itself. A member name that matches is reported as its member's path.
 */
export function findString(value: unknown, matches: (s: string) => boolean): string | null {
  const walk = (v: unknown, at: string): string | null => {
    if (typeof v === 'string') return matches(v) ? at : null;
    if (typeof v !== 'object' || v === null) return null;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        const found = walk(v[i], jsonPath(at, i));
        if (found !== null) return found;
      }
      return null;
    }
    for (const [key, member] of Object.entries(v)) {
      const here = jsonPath(at, key);
      if (matches(key)) return here;
      const found = walk(member, here);
      if (found !== null) return found;
    }
    return null;
  };
  return walk(value, '');
}

export const NUMERIC_RANGE_PROBLEM =
  `is a number PostgreSQL cannot store (at most ${NUMERIC_INTEGER_DIGITS} digits before ` +
  `and ${NUMERIC_FRACTION_DIGITS} after the decimal point)`;

/** Can PostgreSQL numeric (and so jsonb) hold the number written as `text` (a JSON number)? */
export function fitsNumeric(text: string): boolean {
  const m = /^-?(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(text);
  if (!m) return false;
  const digits = (m[1] + (m[2] ?? '')).replace(/^0+/, '');
  const significant = digits.replace(/0+$/, '');
  if (significant === '') return true; // zero
  // value = significant × 10^exponent
  const exponent = Number(m[3] ?? 0) - (m[2]?.length ?? 0) + (digits.length - significant.length);
  return (
    significant.length + exponent <= NUMERIC_INTEGER_DIGITS && -exponent <= NUMERIC_FRACTION_DIGITS
  );
}
