import { setImmediate as nextTurn } from 'node:timers/promises';
import { textInTurns } from './text-in-turns';

describe('textInTurns', () => {
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
});
