import { expectAlike } from '../../../test/support/expect-alike';
import { fuzzSeeds, random, seedRange, withSeed } from '../../../test/support/seeded-random';
import { LayeredMap } from './layered-map';

/** Everything a reader of the map can see, in its order. */
function seen<K, V>(m: ReadonlyMap<K, V>) {
  const forEach: [K, V][] = [];
  m.forEach((v, k) => forEach.push([k, v]));
  return {
    size: m.size,
    entries: [...m],
    keys: [...m.keys()],
    values: [...m.values()],
    forEach,
  };
}

describe('LayeredMap', () => {
  it('reads exactly like a Map copied at each step, order included, over random edits and copies', () => {
    for (const seed of fuzzSeeds(seedRange(1, 60))) {
      withSeed(seed, () => {
        const r = random(seed);
        const initial = Array.from(
          { length: Math.floor(r() * 300) },
          (_, i) => [`k${i}`, i] as const,
        );
        // Pairs of (model, layered), each pair an independent lineage of copies.
        let model = new Map<string, number>(initial);
        let layered = LayeredMap.of<string, number>(initial);
        const older: [Map<string, number>, LayeredMap<string, number>][] = [];
        for (let step = 0; step < 400; step++) {
          const key = `k${Math.floor(r() * 360)}`;
          const roll = r();
          if (roll < 0.4) {
            const value = Math.floor(r() * 1000);
            model.set(key, value);
            const returned = layered.set(key, value);
            if (returned !== layered) expect(returned).toBe(layered);
          } else if (roll < 0.75) {
            expectAlike(layered.delete(key), model.delete(key));
          } else if (roll < 0.95) {
            // A copy: later edits to one lineage must not show in the other.
            older.push([model, layered]);
            model = new Map(model);
            layered = layered.copy();
          } else {
            const [m, l] = older[Math.floor(r() * older.length)] ?? [model, layered];
            expectAlike(seen(l), seen(m));
          }
          expectAlike(
            { has: layered.has(key), get: layered.get(key), size: layered.size },
            { has: model.has(key), get: model.get(key), size: model.size },
          );
        }
        expectAlike(seen(layered), seen(model));
        for (const [m, l] of older) expectAlike(seen(l), seen(m));
      });
    }
  });

  it('keeps the place of a key set again, and puts a key deleted and set again last', () => {
    const m = LayeredMap.of([
      ['a', 1],
      ['b', 2],
      ['c', 3],
    ]);
    m.set('a', 10);
    m.delete('b');
    m.set('b', 20);
    m.set('d', 4);
    expect([...m]).toEqual([
      ['a', 10],
      ['c', 3],
      ['b', 20],
      ['d', 4],
    ]);
  });
});
