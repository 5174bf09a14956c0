import { canonicalHash } from './canonical-hash';
import { canonicalJson } from './canonical-json';
import { JsonValue } from './json-value';
import { fuzzSeeds, seededRandom, withSeed } from '../../../test/support/seeded-random';

describe('canonicalJson', () => {
  it('sorts keys at every depth, keeps array order and drops whitespace', () => {
    const value = { b: 1, a: { d: [3, 1, { z: true, y: null }], c: 'x' } };
    expect(canonicalJson(value)).toBe('{"a":{"c":"x","d":[3,1,{"y":null,"z":true}]},"b":1}');
  });

  it('drops undefined members like JSON.stringify does', () => {
    expect(canonicalJson({ a: undefined, b: 1 })).toBe('{"b":1}');
  });

  it('sorts integer-like keys as strings, although objects enumerate them first', () => {
    expect(canonicalJson({ b: { '10': 1, '9': 2, a: 3 }, a: [{ '2': 0, '1': 0 }] })).toBe(
      '{"a":[{"1":0,"2":0}],"b":{"10":1,"9":2,"a":3}}',
    );
  });

  it('spells every value as sorting and joining by hand does', () => {
    const byHand = (value: JsonValue): string => {
      if (value === null || typeof value !== 'object') return JSON.stringify(value);
      if (Array.isArray(value)) return `[${value.map(byHand).join(',')}]`;
      return `{${Object.keys(value)
        .sort()
        .filter((k) => value[k] !== undefined)
        .map((k) => `${JSON.stringify(k)}:${byHand(value[k] as JsonValue)}`)
        .join(',')}}`;
    };
    let next = (n: number) => n - 1;
    const keys = ['a', 'b', 'Z', '0', '7', '10', 'é', '😀', 'a"b', '__proto__', 'aa'];
    const random = (depth: number): JsonValue => {
      switch (depth > 3 ? next(4) : next(6)) {
        case 0:
          return null;
        case 1:
          return next(2) === 0 ? -next(1000) / 8 : 'x\n\u0000';
        case 2:
          return next(2) === 0;
        case 3:
          return `s${next(100)}`;
        case 4:
          return Array.from({ length: next(4) }, () => random(depth + 1));
        default: {
          const o: Record<string, JsonValue | undefined> = {};
          for (let i = next(5); i > 0; i--) {
            // defineProperty: an own "__proto__" member, as JSON.parse makes it.
            Object.defineProperty(o, keys[next(keys.length)], {
              value: random(depth + 1),
              enumerable: true,
              writable: true,
              configurable: true,
            });
          }
          if (next(5) === 0) o.u = undefined;
          return o as JsonValue;
        }
      }
    };
    for (const seed of fuzzSeeds([7])) {
      withSeed(seed, () => {
        next = seededRandom(seed).int;
        for (let i = 0; i < 500; i++) {
          const value = random(0);
          expect(canonicalJson(value)).toBe(byHand(value));
        }
      });
    }
  });

  it('escapes strings as JSON', () => {
    expect(canonicalJson({ 'k"': 'line\nbreak ünï 😀' })).toBe('{"k\\"":"line\\nbreak ünï 😀"}');
  });
});

describe('canonicalHash', () => {
  const base = { id: 'i-1', tags: { Name: 'web', Env: 'prod' }, ports: [80, 443], enabled: true };

  it('is a sha256 hex digest', () => {
    expect(canonicalHash(base)).toMatch(/^[0-9a-f]{64}$/);
  });

  it('ignores key order and formatting', () => {
    const text =
      '{\n  "ports" : [ 80,\n 443 ],\n\t"enabled": true, "tags": {"Env":"prod","Name":"web"},"id":"i-1"}';
    expect(canonicalHash(JSON.parse(text) as JsonValue)).toBe(canonicalHash(base));
  });

  it.each<[string, JsonValue]>([
    ['a changed value', { ...base, id: 'i-2' }],
    ['a changed nested value', { ...base, tags: { Name: 'web', Env: 'dev' } }],
    ['a reordered array', { ...base, ports: [443, 80] }],
    ['a number turned into a string', { ...base, ports: [80, '443'] }],
    ['an added null member', { ...base, extra: null }],
    ['a removed member', { id: 'i-1', tags: base.tags, ports: base.ports }],
  ])('changes with %s', (_label, changed) => {
    expect(canonicalHash(changed)).not.toBe(canonicalHash(base));
  });
});
