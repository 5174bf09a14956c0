import { isAscii, isUtf8 } from 'node:buffer';
import type { Request } from 'express';
import { DomainError } from '../../domain/shared/domain-error';
import type { ErrorCode } from '../../domain/shared/error-codes';
import { checkJsonValue, JsonLimitError } from '../../domain/terraform';

/**
 * Reads a request body up to `limit` bytes. We read bodies ourselves (no
 * global body parser) so each route has its own limit and a too-large body is
 * refused as a JSON 413 before it is buffered whole. `onChunk` sees each
 * chunk as it arrives (to hash the body while the rest is still on the wire).
 * `allocate` gives the buffer a body of a declared size is read into (one a
 * caller recycles), a new one by default.
 */
export async function readBody(
  req: Request,
  limit: number,
  what = 'request body',
  onChunk?: (chunk: Buffer) => void,
  allocate: (size: number) => Buffer = (size) => Buffer.allocUnsafe(size),
): Promise<Buffer> {
  const declared = Number(req.header('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > limit) throw tooLarge(what, limit);
  // With a declared length (terraform always sends one), the body goes into
  // one buffer of that size: no list of chunks kept alive until a concat
  // copies them again, so a big body is one allocation and its chunks die
  // young. A declared length is only a claim, though: the buffer is taken
  // once a share of it came (DECLARED_SHARE), so a client that declares
  // 512 MiB and sends nothing makes kld hold nothing for it.
  const declaredSize = Number.isSafeInteger(declared) && declared >= 0 ? declared : -1;
  let into: Buffer | null = null;
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      if (size + chunk.length > limit) {
        req.resume(); // drain the rest so the connection can answer
        throw tooLarge(what, limit);
      }
      onChunk?.(chunk);
      const end = size + chunk.length;
      if (into !== null && end <= into.length) chunk.copy(into, size);
      else if (into === null && end <= declaredSize && end * DECLARED_SHARE >= declaredSize) {
        into = allocate(declaredSize);
        let at = 0;
        for (const early of chunks) at += early.copy(into, at);
        chunk.copy(into, at);
        chunks.length = 0;
      } else {
        // Too little of it came yet, no length was declared, or more came
        // than declared (Node's parser does not allow it, but never trust it): collect.
        if (into !== null) chunks.push(into.subarray(0, size));
        into = null;
        chunks.push(chunk);
      }
      size = end;
    }
  } catch (err) {
    // The client closed the connection mid-body (Node's "aborted", ECONNRESET):
    // its doing, not a lost database, which is what that code would be taken for.
    if ((err as NodeJS.ErrnoException).code === 'ECONNRESET') {
      throw new DomainError(
        'REQUEST.INVALID',
        `the connection closed before the ${what} was complete (${size} bytes came)`,
      );
    }
    throw err;
  }
  if (into !== null) return size === into.length ? into : into.subarray(0, size);
  return Buffer.concat(chunks, size);
}

/**
 * A body as text. Every body we take is JSON, so it must be UTF-8: decoding
 * would silently turn a bad byte into U+FFFD, and what was stored would no
 * longer be what was sent.
 */
export function utf8Text(body: Buffer, code: ErrorCode, what: string): string {
  if (!isUtf8(body)) {
    throw new DomainError(
      code,
      `${what} is not valid UTF-8 (bad byte at offset ${invalidUtf8At(body)})`,
    );
  }
  // ASCII (most state documents) is its own UTF-8: decoded as such it is a
  // plain copy, about a third of the UTF-8 decoder's time for a big body.
  return isAscii(body) ? body.toString('ascii') : body.toString('utf8');
}

/**
 * The buffer of a declared length is taken once 1/DECLARED_SHARE of it came:
 * what kld holds for a body is then at most this many times what arrived,
 * and an honest body still lands in one buffer (its first quarter copied
 * once more, a fraction of a millisecond for a 20 MB state).
 */
const DECLARED_SHARE = 4;

function tooLarge(what: string, limit: number): DomainError {
  return new DomainError('REQUEST.TOO_LARGE', `${what} exceeds the limit of ${limit} bytes`, {
    limit,
  });
}

/**
 * Offset of the first byte that does not start a well-formed UTF-8 sequence
 * (Unicode table 3-7: no overlong forms, no surrogates, nothing past U+10FFFF).
 * Only called once isUtf8 said no, to tell the client where.
 */
export function invalidUtf8At(bytes: Uint8Array): number {
  for (let i = 0; i < bytes.length;) {
    const lead = bytes[i];
    if (lead < 0x80) {
      i++;
      continue;
    }
    let more: number;
    let low = 0x80;
    let high = 0xbf;
    if (lead >= 0xc2 && lead <= 0xdf) more = 1;
    else if (lead >= 0xe0 && lead <= 0xef) {
      more = 2;
      if (lead === 0xe0) low = 0xa0;
      if (lead === 0xed) high = 0x9f;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
      more = 3;
      if (lead === 0xf0) low = 0x90;
      if (lead === 0xf4) high = 0x8f;
    } else return i;
    if (i + more >= bytes.length || bytes[i + 1] < low || bytes[i + 1] > high) return i;
    for (let k = 2; k <= more; k++) {
      if (bytes[i + k] < 0x80 || bytes[i + k] > 0xbf) return i;
    }
    i += more + 1;
  }
  return -1;
}

/**
 * Parses a JSON body or refuses it with a clear 400: not JSON, nested too
 * deep, or holding a string PostgreSQL could not store (json-limits).
 */
export function parseJson(body: Buffer, code: ErrorCode, what: string): unknown {
  const text = utf8Text(body, code, what);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new DomainError(code, `${what} is not valid JSON: ${(err as Error).message}`);
  }
  try {
    checkJsonValue(text, value);
  } catch (err) {
    if (err instanceof JsonLimitError) throw limitError(code, what, err);
    throw err;
  }
  return value;
}

/** "lock info Who holds an unpaired UTF-16 surrogate" */
export function limitError(code: ErrorCode, what: string, err: JsonLimitError): DomainError {
  const where = err.path === '' ? what : `${what} ${err.path}`;
  return new DomainError(code, `${where} ${err.problem}`, { path: err.path });
}
