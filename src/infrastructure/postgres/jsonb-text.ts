import { hasLoneSurrogate } from '../../domain/shared/storable-text';
import { unmarkNumbers } from '../../domain/terraform/lossless-json';

// NUL and lone surrogates, as characters: matching NUL is the point here.
const UNSTORABLE_CHAR =
  // eslint-disable-next-line no-control-regex
  /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
// The same as JSON.stringify escapes them: NUL as \u0000, a lone surrogate as
// a lowercase \udXXX (a paired one it writes as is). Preceded by an odd
// number of backslashes it is literal text, not an escape.
const UNSTORABLE_ESCAPE = /(?<!\\)((?:\\\\)*)\\u(?:0000|d[89a-f][0-9a-f]{2})/g;

/**
 * JSON text for a jsonb parameter. jsonb cannot hold the NUL character or a
 * lone surrogate, so in the columns meant for querying each becomes U+FFFD;
 * the exact value always survives in the event log and in the json (not
 * jsonb) columns.
 */
export function jsonbText(value: unknown): string {
  return jsonbTextOf(JSON.stringify(value));
}

/** `jsonbText` of a value whose JSON.stringify text the caller already has. */
export function jsonbTextOf(json: string): string {
  // jsonb numerics are exact: big numbers go in as numbers, not marked strings.
  const text = unmarkNumbers(json);
  // Most text has no escape at all: no need to look for these ones.
  return text.includes('\\u') ? text.replace(UNSTORABLE_ESCAPE, '$1\\ufffd') : text;
}

/**
 * A string for a text column, on the same terms: NUL and lone surrogates
 * become U+FFFD. New requests cannot bring either into a text column (the
 * boundary refuses them); events written before that rule still project.
 */
export function textParam<T extends string | null | undefined>(value: T): T {
  if (typeof value !== 'string') return value;
  if (!value.includes('\u0000') && !hasLoneSurrogate(value)) return value;
  return value.replace(UNSTORABLE_CHAR, '\ufffd') as T;
}
