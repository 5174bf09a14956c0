import { setImmediate as nextTurn } from 'node:timers/promises';

/**
 * Every piece of `pieces`, each built in a turn of the event loop of its
 * own: kld has one thread, and other requests run between pieces instead of
 * waiting for the whole of a big answer.
 */
export async function piecesInTurns<T>(pieces: Iterable<T>): Promise<T[]> {
  const built: T[] = [];
  for (const piece of pieces) {
    built.push(piece);
    await nextTurn();
  }
  return built;
}

/** `pieces` joined, each built in a turn of its own (piecesInTurns). */
export async function textInTurns(pieces: Iterable<string>): Promise<string> {
  return (await piecesInTurns(pieces)).join('');
}

/** Items per turn of mapInTurns. */
const ITEMS_PER_TURN = 1000;

/** `items.map(f)`, ITEMS_PER_TURN items per turn (piecesInTurns). */
export async function mapInTurns<T, U>(items: readonly T[], f: (item: T) => U): Promise<U[]> {
  function* mapped(): Generator<U[]> {
    for (let at = 0; at < items.length; at += ITEMS_PER_TURN) {
      yield items.slice(at, at + ITEMS_PER_TURN).map(f);
    }
  }
  return (await piecesInTurns(mapped())).flat();
}

/**
 * `f` over `[0, length)` in ranges of ITEMS_PER_TURN, a range per turn
 * (piecesInTurns), until it answers false.
 */
export async function rangesInTurns(
  length: number,
  f: (from: number, to: number) => boolean,
): Promise<void> {
  function* ranges(): Generator<void> {
    for (let at = 0; at < length; at += ITEMS_PER_TURN) {
      if (!f(at, Math.min(length, at + ITEMS_PER_TURN))) return;
      yield;
    }
  }
  await piecesInTurns(ranges());
}
