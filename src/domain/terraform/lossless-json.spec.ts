import {
  bigNumberText,
  isBigNumber,
  numberFromText,
  parseJsonExact,
  parseJsonLossless,
  sameNumber,
  stringifyJson,
} from './lossless-json';
import { fuzzSeeds, seedRange, seededRandom, withSeed } from '../../../test/support/seeded-random';

describe('lossless JSON', () => {
  it('keeps numbers a double cannot hold, and writes them back bare', () => {
    const text =
      '{"a":9007199254740993,"b":123456789012345678901234567890,"c":1e400,"d":-0.10000000000000000555,"e":1.5}';
    const value = parseJsonLossless(text) as Record<string, unknown>;
    expect(isBigNumber(value.a)).toBe(true);
    expect(bigNumberText(value.a as string)).toBe('9007199254740993');
    expect(value.e).toBe(1.5);
    expect(stringifyJson(value)).toBe(text);
  });

  it('leaves digits inside strings alone, including escaped quotes', () => {
    const text = '{"id":"12345678901234567890","q":"say \\"9007199254740993\\"","n":[1,2]}';
    expect(parseJsonLossless(text)).toEqual(JSON.parse(text));
  });

  it('treats exactly representable long forms as plain numbers', () => {
    expect(parseJsonLossless('[1.0000000000000000, 100000000000000000000]')).toEqual([1, 1e20]);
  });

  it('keeps a number whose digits a double cannot hold even when a dot splits them', () => {
    const split = parseJsonLossless('{"a":123456789.123456789}') as { a: string };
    expect(bigNumberText(split.a)).toBe('123456789.123456789');
    const text = '{"a":123456789.123456789,"b":[ 1e-400 , -1.5E+308 ]}';
    const value = parseJsonLossless(text) as { a: unknown; b: unknown[] };
    expect(bigNumberText(value.b[0] as string)).toBe('1e-400');
    expect(value.b[1]).toBe(-1.5e308);
    expect(stringifyJson(value)).toBe('{"a":123456789.123456789,"b":[1e-400,-1.5e+308]}');
  });

  it('keeps a big number that follows a string ending in an escaped backslash', () => {
    const text = '{"path":"C:\\\\","n":12345678901234567890,"m":"\\\\"}';
    const value = parseJsonLossless(text) as Record<string, unknown>;
    expect(value.path).toBe('C:\\');
    expect(bigNumberText(value.n as string)).toBe('12345678901234567890');
    expect(stringifyJson(value)).toBe(text);
  });

  it('finds a long number wherever it sits in the text', () => {
    for (let pad = 0; pad < 40; pad++) {
      const space = ' '.repeat(pad);
      const value = parseJsonLossless(
        `{"s":"${'x'.repeat(pad)}12345678901234567890","a":${space}[${space}-9007199254740993.5]}`,
      ) as { s: string; a: unknown[] };
      expect(value.s).toBe(`${'x'.repeat(pad)}12345678901234567890`);
      expect(bigNumberText(value.a[0] as string)).toBe('-9007199254740993.5');
      expect(parseJsonLossless(`[${space}123456789012345, 1e99]`)).toEqual([123456789012345, 1e99]);
    }
  });

  it('keeps a big number that is the whole document', () => {
    expect(bigNumberText(parseJsonLossless(' 98765432109876543210') as string)).toBe(
      '98765432109876543210',
    );
  });

  it('parses ids that look like numbers (uuids, hex, long digit runs) as the strings they are', () => {
    const text =
      '{"id":"7217aa84-6faa-4dc7-e445-670e5c34e8dc","arn":"arn:aws:iam::123456789012345678:x",' +
      '"hex":"1234567890123456e999","list":["9007199254740993"],"n":[0,-1,2.5]}';
    const value = parseJsonLossless(text);
    expect(value).toEqual(JSON.parse(text));
    expect(stringifyJson(value)).toBe(text);
  });

  it('marks exactly the numbers a double changes, whatever surrounds them', () => {
    const numbers = ['1', '-0', '0.1', '9007199254740993', '1e400', '2.5E-7', '1.0000000000000000'];
    const strings = ['"a:1"', '"[12345678901234567890"', '"e999"', '"\\\\"', '"\\""'];
    for (const seed of fuzzSeeds(seedRange(1, 200))) {
      withSeed(seed, () => {
        const { pick } = seededRandom(seed);
        const items = Array.from({ length: 6 }, () => pick([...numbers, ...strings]));
        const text = `{"k":[${items.join(pick([',', ', ', ',\n  ']))}]}`;
        const parsed = parseJsonLossless(text) as { k: unknown[] };
        parsed.k.forEach((v, i) => {
          const item = items[i];
          if (item.startsWith('"')) expect(v).toBe(JSON.parse(item));
          else if (sameNumber(item, String(Number(item)))) expect(v).toBe(Number(item));
          else expect(bigNumberText(v as string)).toBe(item);
        });
      });
    }
  });

  it('refuses documents that contain the marker', () => {
    expect(() => parseJsonLossless('"\uF8FE\uF8FD#1"')).toThrow(/reserved sequence/);
  });

  it('reads stored text back exactly, without refusing what it holds already marked', () => {
    const stored = '{"big": 12345678901234567890, "frac": 0.1000000000000000055511151231257827}';
    const value = parseJsonExact(stored) as Record<string, string>;
    expect(bigNumberText(value.big)).toBe('12345678901234567890');
    expect(bigNumberText(value.frac)).toBe('0.1000000000000000055511151231257827');
    // Text written with plain JSON.stringify from a marked value reads back as that value.
    expect(parseJsonExact(JSON.stringify(value))).toEqual(value);
    expect(stringifyJson(parseJsonExact(stored))).toBe(
      '{"big":12345678901234567890,"frac":0.1000000000000000055511151231257827}',
    );
  });

  it('gives a number from other encodings the value a document would give it', () => {
    for (const text of ['42', '-0.5', '1152921504606846976', '9007199254740993', '1e400']) {
      expect(numberFromText(text)).toEqual((parseJsonLossless(`[${text}]`) as unknown[])[0]);
    }
    expect(numberFromText('42')).toBe(42);
    expect(isBigNumber(numberFromText('9007199254740993'))).toBe(true);
  });

  it('compares decimal texts exactly', () => {
    expect(sameNumber('1.50', '15e-1')).toBe(true);
    expect(sameNumber('9007199254740993', '9007199254740992')).toBe(false);
    expect(sameNumber('-2.5e3', '-2500')).toBe(true);
  });
});
