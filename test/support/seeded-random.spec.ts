import { fuzzSeed, fuzzSeeds, seedRange, withSeed } from './seeded-random';

describe('the seeds a seeded spec runs', () => {
  const saved = process.env.KL_FUZZ_SEED;
  const given = (value: string | undefined) => {
    if (value === undefined) delete process.env.KL_FUZZ_SEED;
    else process.env.KL_FUZZ_SEED = value;
  };
  afterEach(() => given(saved));

  it('are its own unless KL_FUZZ_SEED names others: a seed, a list, ranges', () => {
    given(undefined);
    expect(fuzzSeeds(seedRange(1, 3))).toEqual([1, 2, 3]);
    given('');
    expect(fuzzSeeds([42])).toEqual([42]);
    given('1007');
    expect(fuzzSeeds(seedRange(1, 300))).toEqual([1007]);
    given(' 3, 19 ,100-102');
    expect(fuzzSeeds([42])).toEqual([3, 19, 100, 101, 102]);
  });

  it('refuses what names no seed, rather than running none', () => {
    for (const value of ['x', '5-1', '1.5', '-3', '3,', '1e3']) {
      given(value);
      expect(() => fuzzSeeds([42])).toThrow(/^KL_FUZZ_SEED: /);
    }
  });

  it('is one for a fuzz that draws one sequence per process', () => {
    given(undefined);
    expect(fuzzSeed(77)).toBe(77);
    given('8');
    expect(fuzzSeed(77)).toBe(8);
    given('8-9');
    expect(() => fuzzSeed(77)).toThrow('one seed at a time, not 2');
  });
});

describe('withSeed', () => {
  const replay = 'seed 12 (KL_FUZZ_SEED=12 replays it)';

  it('names the seed, once, in the message and the stack of a failure', () => {
    const caught = (() => {
      try {
        withSeed(12, () => expect(1).toBe(2));
      } catch (error) {
        return error as Error;
      }
    })();
    expect(caught?.message.startsWith(`${replay}: expect(`)).toBe(true);
    expect(caught?.stack?.split(replay)).toHaveLength(2);
  });

  it('names it for an async case too, and passes results through', async () => {
    await expect(
      withSeed(12, async () => {
        await Promise.resolve();
        throw new Error('boom');
      }),
    ).rejects.toThrow(`${replay}: boom`);
    expect(withSeed(12, () => 5)).toBe(5);
    await expect(withSeed(12, async () => 6)).resolves.toBe(6);
  });
});
