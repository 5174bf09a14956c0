import { setImmediate as nextTurn } from 'node:timers/promises';
import { contentMd5 } from '../../domain/terraform';
import { md5InSlices } from './md5-in-slices';

describe('md5InSlices', () => {
  it("is the document's Content-MD5 and size, however it is cut into parts", async () => {
    const text = 'x'.repeat(5_000_000) + 'é 漢 🙂'.repeat(1_000);
    const whole = Buffer.from(text);
    for (const cuts of [[], [1], [3, 2_097_152, 2_097_153, 4_500_000], [whole.length - 1]]) {
      const parts = [0, ...cuts, whole.length]
        .slice(1)
        .map((end, i, ends) => whole.subarray(i === 0 ? 0 : ends[i - 1], end));
      await expect(md5InSlices(parts)).resolves.toEqual({
        md5: contentMd5(text),
        size: whole.length,
      });
    }
    await expect(md5InSlices([])).resolves.toEqual({ md5: contentMd5(''), size: 0 });
  });

  it('lets other work run while a big document is hashed, even one held in a single part', async () => {
    let turns = 0;
    let hashing = true;
    const ticker = (async () => {
      while (hashing) {
        await nextTurn();
        turns += 1;
      }
    })();
    await md5InSlices([Buffer.alloc(9 * 1024 * 1024, 'a')]);
    hashing = false;
    await ticker;
    // 9 MiB in 2 MiB slices: the other work ran between each of them.
    expect(turns).toBeGreaterThanOrEqual(4);
  });
});
