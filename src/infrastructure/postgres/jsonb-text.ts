import { stringifyJson } from '../../domain/terraform/lossless-json';

// A \u0000 escape preceded by an even number of backslashes is a NUL
// character; with an odd number it is the literal text "\u0000".
const NUL_ESCAPE = /(?<!\\)((?:\\\\)*)\\u0000/g;

/**
 * JSON text for a jsonb parameter. jsonb cannot hold the NUL character, so in
 * the columns meant for querying it becomes U+FFFD; the exact value always
 * survives in the event log and in the json (not jsonb) columns.
 */
export function jsonbText(value: unknown): string {
  // jsonb numerics are exact: big numbers go in as numbers, not marked strings.
  return stringifyJson(value).replace(NUL_ESCAPE, '$1\\ufffd');
}
