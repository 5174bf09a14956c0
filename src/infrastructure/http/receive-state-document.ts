import { webcrypto } from 'node:crypto';
import { DomainError } from '../../domain/shared/domain-error';
import { parseStateDocument, STATE_INVALID, StateDocumentV4 } from '../../domain/terraform';
import { utf8Text } from './read-body';

export interface ReceivedStateDocument {
  document: StateDocumentV4;
  /** SHA-256 hex of the bytes as received. */
  checksum: string;
  bytes: number;
}

/**
 * The one way a commit route turns a request body into a state document:
 * numbers beyond double precision kept exact (a plain JSON.parse would round
 * them), bytes that are not UTF-8 refused rather than replaced, and the
 * checksum taken of the bytes exactly as they arrived. Every failure is a
 * STATE.INVALID naming the problem. `parse` may be the equal of
 * `parseStateDocument(decode(body))` that reuses the state's previous
 * document's bytes (DocumentTextMemo), given `decode` for what it decodes.
 */
export async function receiveStateDocument(
  body: Buffer,
  parse: (body: Buffer, decode: (body: Buffer) => string) => StateDocumentV4 = (b) =>
    parseStateDocument(decode(b)),
): Promise<ReceivedStateDocument> {
  // Web Crypto hashes on the thread pool while the document is parsed here.
  const [checksum, document] = await Promise.all([
    webcrypto.subtle.digest('SHA-256', body).then((d) => Buffer.from(d).toString('hex')),
    (async () => parse(body, decode))(),
  ]);
  return { document, checksum, bytes: body.length };
}

function decode(body: Buffer): string {
  if (body.length === 0) throw new DomainError(STATE_INVALID, 'state is empty: send the document');
  return utf8Text(body, STATE_INVALID, 'state');
}
