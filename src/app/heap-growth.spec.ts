import { growingPercent, growthChosen, HEAP_HEADROOM_BYTES } from './heap-growth';

const MIB = 2 ** 20;

describe('growingPercent', () => {
  it('leaves the growth to V8 while the live heap is small', () => {
    expect(growingPercent(100 * MIB, 128 * MIB)).toBe(0);
    expect(growingPercent(HEAP_HEADROOM_BYTES)).toBe(0);
  });

  it('bounds the garbage a big live heap may gather to the headroom', () => {
    // 400 MB kept: at most 128 MB more before the next full collection.
    expect(growingPercent(400 * MIB, 128 * MIB)).toBe(32);
    expect(growingPercent(400 * MIB)).toBe(64);
    expect(growingPercent(HEAP_HEADROOM_BYTES + MIB)).toBe(99);
  });

  it('never asks V8 to collect at every step of a huge heap', () => {
    expect(growingPercent(10_000 * MIB, 128 * MIB)).toBe(10);
  });
});

describe('growthChosen', () => {
  it("sees the operator's factor, given to node or in NODE_OPTIONS, in either spelling", () => {
    expect(growthChosen(['--heap-growing-percent=20'])).toBe(true);
    expect(growthChosen([], '--inspect --heap_growing_percent=300')).toBe(true);
    expect(growthChosen(['--enable-source-maps'], '--max-old-space-size=4096')).toBe(false);
  });
});
