/** A deterministic random source for property tests, so a failure replays: xorshift32 in [0, 1). */
export function random(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 2 ** 32;
  };
}

/** What tests draw from a seeded source: integers, picks and chances. */
export interface SeededRandom {
  /** In [0, 1). */
  next(): number;
  /** An integer in [0, n). */
  int(n: number): number;
  pick<T>(items: readonly T[]): T;
  /** True with probability p. */
  chance(p: number): boolean;
}

/**
 * mulberry32, the generator the fuzzes and the random-history property
 * tests were written against: their fixed seeds, and the `KL_FUZZ_SEED`s
 * earlier runs printed, replay the same cases through it.
 */
export function seededRandom(seed: number): SeededRandom {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), a | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  return {
    next,
    int,
    pick: <T>(items: readonly T[]): T => items[int(items.length)],
    chance: (p: number) => next() < p,
  };
}

/** `count` seeds from `first`: the seeds a property test runs by default. */
export function seedRange(first: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => first + i);
}

/**
 * The seeds a seeded spec runs: its own, or those `KL_FUZZ_SEED` names instead
 * (one seed `7`, a list `7,19`, a range `100-131`, or a mix), so a printed
 * seed replays alone and any run can try others. Every seeded spec takes its
 * seeds here, so one variable replays or widens them all.
 */
export function fuzzSeeds(defaults: readonly number[]): number[] {
  const given = process.env.KL_FUZZ_SEED?.trim();
  if (!given) return [...defaults];
  return given.split(',').flatMap((part) => {
    const range = /^\s*(\d+)\s*-\s*(\d+)\s*$/.exec(part);
    if (range && Number(range[2]) >= Number(range[1])) {
      return seedRange(Number(range[1]), Number(range[2]) - Number(range[1]) + 1);
    }
    if (!/^\s*\d+\s*$/.test(part))
      throw new Error(`KL_FUZZ_SEED: "${part}" is neither a seed nor a range low-high`);
    return [Number(part)];
  });
}

/**
 * Runs one seed's case; a failure says which seed and how to replay it,
 * ahead of the assertion's own message.
 */
export function withSeed<T>(seed: number, run: () => T): T {
  const named = (error: unknown): never => {
    if (error instanceof Error) {
      const line = `seed ${seed} (KL_FUZZ_SEED=${seed} replays it)`;
      if (!error.message.startsWith('seed ')) {
        // V8 writes the stack out when first read, with the message of that moment: read it
        // first. Jest prints the stack.
        const { message, stack } = error;
        error.message = `${line}: ${message}`;
        if (stack !== undefined) {
          error.stack = stack.includes(message)
            ? stack.replace(message, error.message)
            : `${line}\n${stack}`;
        }
      }
    }
    throw error;
  };
  try {
    const result = run();
    return result instanceof Promise ? (result.catch(named) as T) : result;
  } catch (error) {
    return named(error);
  }
}

/**
 * The seed of a fuzz that draws one sequence for a whole process (its
 * requests share a server): `KL_FUZZ_SEED`, which must name one seed, else
 * `fallback`.
 */
export function fuzzSeed(fallback: number): number {
  const seeds = fuzzSeeds([fallback]);
  if (seeds.length !== 1) {
    throw new Error(`KL_FUZZ_SEED: this fuzz replays one seed at a time, not ${seeds.length}`);
  }
  return seeds[0];
}
