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
