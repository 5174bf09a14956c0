import type { Writable } from 'node:stream';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { idleBoundOf } from './connection-drain';

/**
 * One piece of an answer: a text, bytes, or several byte ranges written
 * together (corked: one vectored write, no copy joining them).
 */
export type AnswerPiece = string | Uint8Array | readonly Uint8Array[];

/**
 * Writes `pieces`, one per turn of the event loop, then ends with `last`;
 * pieces made as they are asked for (a slice's pages) are asked for once
 * the one before has left kld's buffer.
 * Turns: the text of a 20,000-instance slice encoded in one write held kld's
 * thread ~40 ms. Each piece waits for the one before to leave kld's buffer:
 * written regardless, the answer sat in the socket's buffer, and the request
 * held it, until a reader that stopped reading went or kld stopped. A reader
 * that takes nothing for `silentMs` is cut off, and one gone meanwhile is
 * written no more: by default as long as kld keeps its connection idle
 * (KL_HTTP_IDLE_TIMEOUT), a reader that stopped being no busier than an idle client.
 */
export async function writeInTurns(
  res: Writable,
  pieces: Iterable<AnswerPiece> | AsyncIterable<AnswerPiece>,
  last = '',
  silentMs = idleBoundOf(res),
): Promise<void> {
  try {
    await writeAll(res, pieces, silentMs);
  } catch (err) {
    // Part of the answer may be out: cut it off, so that no reader takes it for whole.
    // Nothing out yet (an HTTP answer's headers unsent): the error is the answer.
    if ((res as { headersSent?: boolean }).headersSent !== false) res.destroy();
    throw err;
  }
  if (!res.destroyed) res.end(last);
}

async function writeAll(
  res: Writable,
  pieces: Iterable<AnswerPiece> | AsyncIterable<AnswerPiece>,
  silentMs: number,
): Promise<void> {
  for await (const piece of pieces) {
    if (res.destroyed) return;
    if (!write(res, piece) && !(await drained(res, silentMs))) {
      res.destroy();
      return;
    }
    // A turn after a drained piece too: a socket whose reader keeps up drains in
    // the same turn (on the next tick), and a 50 MB answer went out in one turn.
    await nextTurn();
  }
}

/** Writes one piece; false when `res` asks the writer to wait for 'drain'. */
function write(res: Writable, piece: AnswerPiece): boolean {
  if (typeof piece === 'string' || piece instanceof Uint8Array) return res.write(piece);
  res.cork();
  let room = true;
  for (const part of piece) room = res.write(part);
  res.uncork();
  return room;
}

/**
 * True once `res` drains; false if it closes first, or if its reader took
 * nothing of what is buffered for `silentMs` (one that reads slowly is
 * waited for, however long the piece takes).
 */
function drained(res: Writable, silentMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    let buffered = res.writableLength;
    let tookAt = Date.now();
    const done = (ok: boolean) => {
      clearInterval(timer);
      res.off('drain', onDrain);
      res.off('close', onClose);
      resolve(ok);
    };
    const onDrain = () => done(true);
    const onClose = () => done(false);
    const timer = setInterval(
      () => {
        const now = res.writableLength;
        if (now < buffered) tookAt = Date.now();
        else if (Date.now() - tookAt >= silentMs) done(false);
        buffered = now;
      },
      Math.min(silentMs, 1000),
    );
    res.once('drain', onDrain);
    res.once('close', onClose);
  });
}
