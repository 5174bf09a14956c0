import { setImmediate as nextTurn } from 'node:timers/promises';
import { mapInTurns, rangesInTurns, SharedTurns, textInTurns } from './in-turns';

describe('in turns of the event loop', () => {
  it('is the pieces joined, and lets other work run between them', async () => {
    let turns = 0;
    let writing = true;
    const ticker = (async () => {
      while (writing) {
        await nextTurn();
        turns += 1;
      }
    })();
    const seen: number[] = [];
    function* pieces() {
      for (const piece of ['{"a":', '1', ',"b":', '[]', '}']) {
        seen.push(turns);
        yield piece;
      }
    }
    const text = await textInTurns(pieces());
    writing = false;
    await ticker;
    expect(text).toBe('{"a":1,"b":[]}');
    // Each piece was asked for in a later turn than the one before it.
    expect(seen).toEqual([0, 1, 2, 3, 4]);
  });

  it('maps items in order, a thousand per turn, other work running between', async () => {
    let turns = 0;
    let mapping = true;
    const ticker = (async () => {
      while (mapping) {
        await nextTurn();
        turns += 1;
      }
    })();
    const items = Array.from({ length: 2_500 }, (_, i) => i);
    const seenAt: number[] = [];
    const doubled = await mapInTurns(items, (i) => {
      seenAt.push(turns);
      return i * 2;
    });
    mapping = false;
    await ticker;
    expect(doubled).toEqual(items.map((i) => i * 2));
    expect(new Set(seenAt)).toEqual(new Set([0, 1, 2]));
    expect(await mapInTurns([], (i: number) => i)).toEqual([]);
  });

  it('runs over ranges of a thousand, a range per turn, until told to stop', async () => {
    let turns = 0;
    let running = true;
    const ticker = (async () => {
      while (running) {
        await nextTurn();
        turns += 1;
      }
    })();
    const ranges: [number, number, number][] = [];
    await rangesInTurns(2_500, (from, to) => {
      ranges.push([from, to, turns]);
      return true;
    });
    const stopped: number[] = [];
    await rangesInTurns(3_500, (from) => {
      stopped.push(from);
      return from < 1_000;
    });
    running = false;
    await ticker;
    expect(ranges).toEqual([
      [0, 1_000, 0],
      [1_000, 2_000, 1],
      [2_000, 2_500, 2],
    ]);
    expect(stopped).toEqual([0, 1_000]);
  });

  it('shares turns: one piece of all callers per turn, a caller going on first, the rest in line', async () => {
    const turns = new SharedTurns();
    let turn = 0;
    let running = true;
    const ticker = (async () => {
      while (running) {
        await nextTurn();
        turn += 1;
      }
    })();
    const ran: string[] = [];
    // Three jobs of three pieces each, asked for at once.
    await Promise.all(
      ['a', 'b', 'c'].map(async (job) => {
        for (let piece = 0; piece < 3; piece++) {
          await turns.take(piece > 0);
          ran.push(`${job}${piece}@${turn}`);
        }
      }),
    );
    running = false;
    await ticker;
    const at = ran.map((r) => Number(r.split('@')[1]));
    // Never two pieces in one turn, and each job's pieces one after another.
    expect(new Set(at).size).toBe(ran.length);
    expect(ran.map((r) => r.split('@')[0])).toEqual([
      'a0',
      'a1',
      'a2',
      'b0',
      'b1',
      'b2',
      'c0',
      'c1',
      'c2',
    ]);
  });
});
