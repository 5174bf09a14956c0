import { setImmediate as nextTurn } from 'node:timers/promises';

/**
 * `pieces` joined, each piece built in a turn of the event loop of its own:
 * other requests run between pieces instead of waiting for the whole text
 * (kld has one thread).
 */
export async function textInTurns(pieces: Iterable<string>): Promise<string> {
  const text: string[] = [];
  for (const piece of pieces) {
    text.push(piece);
    await nextTurn();
  }
  return text.join('');
}
