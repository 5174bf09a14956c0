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

/**
 * Turns of the event loop shared by many callers' work (subscribers of the
 * event log catching up at once): one piece of all of theirs per turn, so
 * whatever else kld has to do waits behind one piece, not one from each.
 * A caller going on with work it has begun (the rest of a page) goes before
 * those starting theirs, so pieces of one job follow each other and few jobs
 * are held half done (each a page of the log in memory). Callers waiting
 * for a turn are woken, never poll: the loop sleeps when nobody has work.
 */
export class SharedTurns {
  private taken = false;
  private readonly waiting: (() => void)[] = [];
  /** Callers fetching work (room) who are not in line yet. */
  private fetching = 0;
  private readonly roomWaiters: (() => void)[] = [];

  /**
   * Waits until fewer than `most` callers are fetching work or waiting in
   * line with it, then counts the caller as fetching until it calls the
   * function returned (when its work is at hand, just before it asks for
   * turns). So work fetched ahead (pages of the log read, each in memory)
   * stays bounded however many callers there are; a caller whose work is
   * held up elsewhere (a consumer not reading) is neither, and holds no one
   * back.
   */
  async room(most: number): Promise<() => void> {
    while (this.fetching + this.waiting.length >= most) {
      await new Promise<void>((resolve) => this.roomWaiters.push(resolve));
    }
    this.fetching++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.fetching--;
      this.roomWaiters.shift()?.();
    };
  }

  /**
   * Resolves when the caller's next piece may run: at once when this turn
   * has none yet. `goingOn`: the piece continues the caller's job.
   */
  take(goingOn = false): Promise<void> {
    if (this.taken) {
      return new Promise((resolve) =>
        goingOn ? this.waiting.unshift(resolve) : this.waiting.push(resolve),
      );
    }
    this.taken = true;
    setImmediate(this.pass);
    return Promise.resolve();
  }

  /** The next turn goes to the first in line, if any. */
  private readonly pass = (): void => {
    const next = this.waiting.shift();
    // One fewer in line: room for a caller to fetch more.
    this.roomWaiters.shift()?.();
    if (next === undefined) {
      this.taken = false;
      return;
    }
    next();
    setImmediate(this.pass);
  };
}
