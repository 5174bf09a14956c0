import { createHash } from 'node:crypto';
import type { Request } from 'express';
import { DomainError } from '../../domain/shared/domain-error';
import { parseStateDocument, STATE_INVALID, StateDocumentV4 } from '../../domain/terraform';
import { readBody, utf8Text } from './read-body';

export interface ReceivedStateDocument {
  document: StateDocumentV4;
  /** SHA-256 hex of the bytes as received. */
  checksum: string;
  bytes: number;
}

/**
 * The one way a commit route turns a request body into a state document:
 * read up to `limit` bytes, numbers beyond double precision kept exact (a
 * plain JSON.parse would round them), bytes that are not UTF-8 refused rather
 * than replaced, and the checksum taken of the bytes exactly as they arrived
 * (chunk by chunk, while the rest is still on the wire: no second pass over a
 * big body). Every failure is a STATE.INVALID naming the problem. `parse` may
 * be the equal of `parseStateDocument(decode(body))` that reuses the state's
 * previous document's bytes (DocumentTextMemo), given `decode` for what it
 * decodes; `allocate` the buffer the body is read into (`readBody`).
 */
export async function receiveStateDocument(
  req: Request,
  limit: number,
  parse: (body: Buffer, decode: (body: Buffer) => string) => StateDocumentV4 = (b) =>
    parseStateDocument(decode(b)),
  allocate?: (size: number) => Buffer,
): Promise<ReceivedStateDocument> {
  const hash = createHash('sha256');
  const body = await readBody(req, limit, 'state', (chunk) => hash.update(chunk), allocate);
  const checksum = hash.digest('hex');
  return { document: parse(body, decode), checksum, bytes: body.length };
}

function decode(body: Buffer): string {
  if (body.length === 0) throw new DomainError(STATE_INVALID, 'state is empty: send the document');
  return utf8Text(body, STATE_INVALID, 'state');
}
