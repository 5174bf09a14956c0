// The one place the domain touches node:crypto: hashing is deterministic, so
// it keeps the domain pure, but it stays isolated so a browser or WASM build
// only has to swap this module.
import * as crypto from 'node:crypto';

import { canonicalJson } from './canonical-json';
import { JsonValue } from './json-value';

/** sha256 (lowercase hex) of the value's canonical JSON. */
export function canonicalHash(value: JsonValue): string {
  return sha256Hex(canonicalJson(value));
}

// Node's one-shot hash (20.12 and later): for the small texts of a state's
// instances, tens of thousands per first commit, it costs about half of
// creating a Hash object for each.
const oneShot = (
  crypto as {
    hash?: (algorithm: string, data: string | Buffer, encoding: 'hex' | 'latin1') => string;
  }
).hash;

/** sha256 (lowercase hex) of the text's UTF-8 bytes. */
export function sha256Hex(text: string): string {
  return oneShot !== undefined
    ? oneShot('sha256', text, 'hex')
    : crypto.createHash('sha256').update(text, 'utf8').digest('hex');
}

/**
 * sha256 of the bytes, in Node's shared pool (as `Buffer.from` puts small
 * buffers): a digest as a buffer of its own is an ArrayBuffer and a block of
 * memory apiece, made and freed for each of a first commit's 20,000
 * instances (or kept with them). Taken as a latin1 string, one byte per
 * character, it is a small string instead, copied into the pool.
 */
export function sha256Bytes(bytes: Buffer): Buffer {
  return oneShot !== undefined
    ? Buffer.from(oneShot('sha256', bytes, 'latin1'), 'latin1')
    : Buffer.from(crypto.createHash('sha256').update(bytes).digest());
}

/** Base64 MD5 of the UTF-8 bytes: the Content-MD5 header terraform checks. */
export function contentMd5(body: string | Buffer): string {
  return crypto.createHash('md5').update(body).digest('base64');
}
