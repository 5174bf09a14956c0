/**
 * What a PostgreSQL text (or jsonb) value can hold. Neither takes the NUL
 * character, nor an unpaired UTF-16 surrogate (which is not Unicode text at
 * all), and a btree index entry must stay under about 2.7 kB. Strings that
 * land in indexed columns (addresses, names, keys) are capped well below that,
 * because one index entry carries up to three of them.
 */
export const MAX_KEY_BYTES = 800;

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export function hasLoneSurrogate(value: string): boolean {
  return LONE_SURROGATE.test(value);
}

/** Why `value` cannot be stored as text, as the end of a sentence; null when it can. */
export function textProblem(value: string): string | null {
  if (value.includes('\u0000')) return 'holds a NUL character';
  if (hasLoneSurrogate(value)) return 'holds an unpaired UTF-16 surrogate';
  return null;
}

/** Like textProblem, for a string that is (part of) an index key. */
export function keyProblem(value: string, maxBytes = MAX_KEY_BYTES): string | null {
  const problem = textProblem(value);
  if (problem !== null) return problem;
  return utf8Length(value) > maxBytes ? `is longer than ${maxBytes} bytes` : null;
}

/** Bytes of `value` in UTF-8 (lone surrogates count as the 3 bytes of U+FFFD). */
export function utf8Length(value: string): number {
  let bytes = 0;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < value.length) {
      const next = value.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 4;
        i++;
      } else bytes += 3;
    } else bytes += 3;
  }
  return bytes;
}
