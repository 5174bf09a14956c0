import { RandomUuids } from './random-uuids';

const V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('RandomUuids', () => {
  it('spells version 4 UUIDs, all different, across many refills', () => {
    const ids = new RandomUuids();
    const seen = new Set<string>();
    for (let i = 0; i < 5000; i++) {
      const id = ids.uuid();
      expect(id).toMatch(V4);
      seen.add(id);
    }
    expect(seen.size).toBe(5000);
  });

  it('varies every hex digit that is not the version or the variant', () => {
    const ids = new RandomUuids();
    const digits = Array.from({ length: 36 }, () => new Set<string>());
    for (let i = 0; i < 2000; i++) [...ids.uuid()].forEach((c, k) => digits[k].add(c));
    digits.forEach((seen, k) => {
      if ([8, 13, 18, 23].includes(k)) expect([...seen]).toEqual(['-']);
      else if (k === 14) expect([...seen]).toEqual(['4']);
      else if (k === 19) expect([...seen].sort()).toEqual(['8', '9', 'a', 'b']);
      else expect(seen.size).toBe(16);
    });
  });
});

describe('RandomUuids, time-ordered (event ids)', () => {
  const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
  const millisOf = (id: string) => parseInt(id.slice(0, 8) + id.slice(9, 13), 16);

  it('spells version 7 UUIDs carrying the time they were taken, all different', () => {
    const ids = new RandomUuids({ timeOrdered: true });
    const seen = new Set<string>();
    for (let i = 0; i < 5000; i++) {
      const before = Date.now();
      const id = ids.uuid();
      expect(id).toMatch(V7);
      expect(millisOf(id)).toBeGreaterThanOrEqual(before);
      expect(millisOf(id)).toBeLessThanOrEqual(Date.now());
      seen.add(id);
    }
    expect(seen.size).toBe(5000);
  });

  it('sorts ids taken in later milliseconds after earlier ones (as text; PostgreSQL orders uuids by their bytes, the same order)', async () => {
    const ids = new RandomUuids({ timeOrdered: true });
    const earlier = Array.from({ length: 300 }, () => ids.uuid());
    await new Promise((r) => setTimeout(r, 5));
    const later = Array.from({ length: 300 }, () => ids.uuid());
    const newest = earlier.reduce((a, b) => (a > b ? a : b));
    for (const id of later) expect(id > newest).toBe(true);
  });

  it('keeps 74 random bits: every digit after the time varies', () => {
    const ids = new RandomUuids({ timeOrdered: true });
    const digits = Array.from({ length: 36 }, () => new Set<string>());
    for (let i = 0; i < 2000; i++) [...ids.uuid()].forEach((c, k) => digits[k].add(c));
    for (let k = 15; k < 36; k++) {
      if (k === 18 || k === 23) expect([...digits[k]]).toEqual(['-']);
      else if (k === 19) expect([...digits[k]].sort()).toEqual(['8', '9', 'a', 'b']);
      else expect(digits[k].size).toBe(16);
    }
  });
});
