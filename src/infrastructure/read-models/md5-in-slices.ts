import { createHash } from 'node:crypto';
import { setImmediate as nextTurn } from 'node:timers/promises';

/** Bytes hashed per turn of the event loop. */
const SLICE_BYTES = 2 * 1024 * 1024;

/**
 * The base64 MD5 (terraform's `Content-MD5`) and size of a document held in
 * parts, taken a slice per turn of the event loop. A 20k-instance document
 * hashed in one turn held kld's only thread about 50 ms right after each
 * commit (when the served copy is brought up to date), and every request
 * arriving meanwhile waited behind it.
 */
export async function md5InSlices(
  parts: readonly Buffer[],
): Promise<{ md5: string; size: number }> {
  const md5 = createHash('md5');
  let size = 0;
  let sinceTurn = 0;
  for (const part of parts) {
    for (let at = 0; at < part.length;) {
      if (sinceTurn >= SLICE_BYTES) {
        await nextTurn();
        sinceTurn = 0;
      }
      const slice = part.subarray(at, at + SLICE_BYTES - sinceTurn);
      md5.update(slice);
      at += slice.length;
      sinceTurn += slice.length;
    }
    size += part.length;
  }
  return { md5: md5.digest('base64'), size };
}
