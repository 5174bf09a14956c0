import { fuzzSeeds, random, withSeed } from '../../../test/support/seeded-random';
import { copyField, copyJsonField } from './copy-rows';
import { jsonbText } from './jsonb-text';

/** Strings full of what COPY's text format and JSON escape: backslashes, control characters. */
function awkwardString(rnd: () => number): string {
  const alphabet = ['\\', '\n', '\r', '\t', '\u0000', '"', '\\N', 'é', '😀', '\ud800', 'a', ' '];
  let s = '';
  for (let i = Math.floor(rnd() * 12); i > 0; i--)
    s += alphabet[Math.floor(rnd() * alphabet.length)];
  return s;
}

function awkwardValue(rnd: () => number, depth = 0): unknown {
  const roll = rnd();
  if (depth > 2 || roll < 0.4) return awkwardString(rnd);
  if (roll < 0.5) return Math.floor(rnd() * 1000) - 500;
  if (roll < 0.75)
    return Array.from({ length: Math.floor(rnd() * 4) }, () => awkwardValue(rnd, depth + 1));
  return Object.fromEntries(
    Array.from({ length: Math.floor(rnd() * 4) }, () => [
      awkwardString(rnd),
      awkwardValue(rnd, depth + 1),
    ]),
  );
}

describe('copyJsonField', () => {
  it('writes JSON text exactly as copyField does, for JSON.stringify and jsonbText output', () => {
    for (const seed of fuzzSeeds([2026])) {
      withSeed(seed, () => {
        const rnd = random(seed);
        for (let i = 0; i < 2000; i++) {
          const value = awkwardValue(rnd);
          for (const text of [JSON.stringify(value), jsonbText(value)]) {
            expect(copyJsonField(text)).toBe(copyField(text));
          }
        }
      });
    }
  });

  it('doubles backslashes and leaves text without them as it is', () => {
    expect(copyJsonField('{"a":"\\\\n\\"x"}')).toBe('{"a":"\\\\\\\\n\\\\"x"}');
    const plain = '{"a":[1,"b"]}';
    expect(copyJsonField(plain)).toBe(plain);
  });
});
