import type { Request, Response } from 'express';
import { unmarkNumbers } from '../../domain/terraform/lossless-json';
import type { Logger } from '../logging/logger';
import { logAnswerCutOff } from './answer-cut-off';
import { writeInTurns } from './write-in-turns';

/** About what one piece holds: a few milliseconds of encoding and writing. */
export const JSON_PIECE_CHARS = 256 * 1024;

/**
 * Answers `body` as JSON (the status and headers already set): in one write
 * when it fits one piece, else a piece per turn (writeInTurns: a reader that
 * stops taking it is cut off, and it is made no further than read). A big
 * answer goes without Content-Length and ETag: both need the whole text first.
 * `lossless`: stringifyJson's text (marked numbers bare), else JSON.stringify's.
 * A value that fails to encode before the first byte throws (the caller's
 * error answer); after it, the answer is cut off and `logger` says why.
 */
export function sendJson(res: Response, body: unknown, lossless: boolean, logger: Logger): void {
  const pieces = jsonPieces(body, { lossless });
  const first = pieces.next();
  const text = first.done ? '' : first.value;
  if (!res.getHeader('Content-Type')) {
    res.setHeader('Content-Type', 'application/json; charset=utf-8');
  }
  // Only the last piece can be shorter than a piece.
  if (text.length < JSON_PIECE_CHARS) {
    res.send(text);
    return;
  }
  writeInTurns(res, andThen(text, pieces)).catch((err: unknown) => {
    res.destroy();
    logAnswerCutOff(logger, err, (res.req as (Request & { id?: string }) | undefined)?.id);
  });
}

function* andThen(first: string, rest: Iterator<string>): Generator<string, void, undefined> {
  yield first;
  for (let next = rest.next(); next.done !== true; next = rest.next()) yield next.value;
}

/**
 * `value`'s JSON (exactly stringifyJson's text, or JSON.stringify's without
 * `lossless`) in pieces of about `pieceChars`, each made only when asked for,
 * so that a caller taking one per turn of the event loop never encodes the
 * whole answer in one. Arrays and
 * plain objects are walked; an array's elements, and anything else, are
 * encoded whole, so a piece runs past `pieceChars` by one element at most.
 * Why: a query answer of 100,000 rows (~50 MB) encoded and sent by res.json
 * held kld's thread ~350 ms, a 409 naming 10,000 holders ~50 ms.
 */
export function* jsonPieces(
  value: unknown,
  { lossless = true, pieceChars = JSON_PIECE_CHARS } = {},
): Generator<string, void, undefined> {
  const encode = lossless ? losslessText : plainText;
  let piece = '';
  function* walk(v: unknown): Generator<string, void, undefined> {
    if (Array.isArray(v)) {
      piece += '[';
      for (let i = 0; i < v.length; i++) {
        // JSON.stringify writes what it cannot encode in an array as null.
        piece += (i === 0 ? '' : ',') + (encode(v[i]) ?? 'null');
        if (piece.length >= pieceChars) {
          yield piece;
          piece = '';
        }
      }
      piece += ']';
    } else if (isPlainObject(v)) {
      piece += '{';
      let first = true;
      for (const key of Object.keys(v)) {
        const member = v[key];
        const whole = isContainer(member) ? null : encode(member);
        if (whole === undefined) continue; // as JSON.stringify: the member is left out
        piece += `${first ? '' : ','}${JSON.stringify(key)}:${whole ?? ''}`;
        first = false;
        if (whole === null) yield* walk(member);
        else if (piece.length >= pieceChars) {
          yield piece;
          piece = '';
        }
      }
      piece += '}';
    } else {
      piece += encode(v) ?? '';
    }
  }
  yield* walk(value);
  if (piece !== '') yield piece;
}

/** stringifyJson's text of `v`; undefined for what JSON.stringify leaves out. */
function losslessText(v: unknown): string | undefined {
  const text = plainText(v);
  return text === undefined ? undefined : unmarkNumbers(text);
}

function plainText(v: unknown): string | undefined {
  return JSON.stringify(v) as string | undefined;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (v === null || typeof v !== 'object') return false;
  const proto = Object.getPrototypeOf(v) as unknown;
  return (proto === Object.prototype || proto === null) && !('toJSON' in v);
}

function isContainer(v: unknown): boolean {
  return Array.isArray(v) || isPlainObject(v);
}
