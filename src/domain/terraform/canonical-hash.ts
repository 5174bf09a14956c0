// The one place the domain touches node:crypto: hashing is deterministic, so
// it keeps the domain pure, but it stays isolated so a browser or WASM build
// only has to swap this module.
import { createHash } from 'node:crypto';

import { canonicalJson } from './canonical-json';
import { JsonValue } from './json-value';

/** sha256 (lowercase hex) of the value's canonical JSON. */
export function canonicalHash(value: JsonValue): string {
  return createHash('sha256').update(canonicalJson(value), 'utf8').digest('hex');
}

/** Base64 MD5 of the UTF-8 bytes: the Content-MD5 header terraform checks. */
export function contentMd5(body: string | Buffer): string {
  return createHash('md5').update(body).digest('base64');
}
