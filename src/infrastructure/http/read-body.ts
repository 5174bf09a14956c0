import type { Request } from 'express';
import { DomainError } from '../../domain/shared/domain-error';

/**
 * Reads a request body up to `limit` bytes. We read bodies ourselves (no
 * global body parser) so each route has its own limit and a too-large body is
 * refused as a JSON 413 before it is buffered whole.
 */
export async function readBody(
  req: Request,
  limit: number,
  what = 'request body',
): Promise<Buffer> {
  const declared = Number(req.header('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > limit) throw tooLarge(what, limit);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) {
      req.resume(); // drain the rest so the connection can answer
      throw tooLarge(what, limit);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size);
}

function tooLarge(what: string, limit: number): DomainError {
  return new DomainError('REQUEST.TOO_LARGE', `${what} exceeds the limit of ${limit} bytes`, {
    limit,
  });
}

/** Parses JSON or refuses with a clear 400. */
export function parseJson(body: Buffer, code: string, what: string): unknown {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (err) {
    throw new DomainError(code, `${what} is not valid JSON: ${(err as Error).message}`);
  }
}
