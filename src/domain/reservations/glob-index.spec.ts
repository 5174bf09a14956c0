import { randomAddress, randomGlob, rng } from '../../../test/support/random-globs';
import { parseInstanceAddress } from '../terraform/instance-address';
import { AddressGlob, globCovers, globsIntersect, parseAddressGlob } from './address-glob';
import { GlobIndex } from './glob-index';
import { fuzzSeeds, seedRange, withSeed } from '../../../test/support/seeded-random';

function indexOf(globs: AddressGlob[]): GlobIndex<number> {
  const index = new GlobIndex<number>();
  globs.forEach((g, i) => index.add(g, i));
  return index;
}

const sorted = (s: Set<number>) => [...s].sort((a, b) => a - b);

/** The index against the pairwise predicates it replaces, over random globs (random-globs). */
describe('GlobIndex', () => {
  const SEEDS = 300;

  it('finds exactly the held globs that meet some wanted glob, as globsIntersect says', () => {
    let met = 0;
    const seeds = fuzzSeeds(seedRange(1, SEEDS));
    for (const seed of seeds) {
      withSeed(seed, () => {
        const r = rng(seed);
        const held = Array.from({ length: 1 + Math.floor(r() * 40) }, () =>
          parseAddressGlob(randomGlob(r)),
        );
        const wanted = Array.from({ length: 1 + Math.floor(r() * 6) }, () =>
          parseAddressGlob(randomGlob(r)),
        );
        const expected = held.flatMap((h, i) =>
          wanted.some((w) => globsIntersect(w, h)) ? [i] : [],
        );
        const found = sorted(indexOf(held).meeting(wanted));
        expect({ seed, found }).toEqual({ seed, found: expected });
        met += expected.length;
      });
    }
    // The vocabulary makes globs meet often, so both answers are exercised.
    expect(met).toBeGreaterThan(seeds.length);
  });

  it('finds exactly the held globs that cover some address, as globCovers says', () => {
    let covered = 0;
    const seeds = fuzzSeeds(seedRange(1, SEEDS));
    for (const seed of seeds) {
      withSeed(seed, () => {
        const r = rng(seed + SEEDS);
        const held = Array.from({ length: 1 + Math.floor(r() * 40) }, () =>
          parseAddressGlob(randomGlob(r)),
        );
        const addresses = Array.from({ length: 1 + Math.floor(r() * 8) }, () =>
          parseInstanceAddress(randomAddress(r)),
        );
        const index = indexOf(held);
        const expected = held.flatMap((h, i) =>
          addresses.some((a) => globCovers(h, a)) ? [i] : [],
        );
        expect({ seed, found: sorted(index.covering(addresses)) }).toEqual({
          seed,
          found: expected,
        });
        for (const a of addresses) {
          expect({ seed, a, covered: index.covers(a) }).toEqual({
            seed,
            a,
            covered: held.some((h) => globCovers(h, a)),
          });
        }
        covered += expected.length;
      });
    }
    expect(covered).toBeGreaterThan(seeds.length);
  });

  it('keeps 1 and "1" apart, and a quoted key whole', () => {
    const held = ['aws_x.m[1]', 'module.a["x.y"].*', 'aws_x.m["a[1].b"]'].map(parseAddressGlob);
    const index = indexOf(held);
    expect(sorted(index.meeting([parseAddressGlob('aws_x.m["1"]')]))).toEqual([]);
    expect(sorted(index.meeting([parseAddressGlob('aws_x.m')]))).toEqual([0, 2]);
    expect(sorted(index.covering([parseInstanceAddress('module.a["x"].aws_x.m')]))).toEqual([]);
    expect(index.covers(parseInstanceAddress('module.a["x.y"].aws_x.m'))).toBe(true);
    expect(index.covers(parseInstanceAddress('aws_x.m["a[1].b"]'))).toBe(true);
  });
});
