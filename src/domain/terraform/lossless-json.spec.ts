import {
  bigNumberText,
  isBigNumber,
  parseJsonLossless,
  sameNumber,
  stringifyJson,
} from './lossless-json';

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

  it('refuses documents that contain the marker', () => {
    expect(() => parseJsonLossless('"\uF8FE\uF8FD#1"')).toThrow(/reserved sequence/);
  });

  it('compares decimal texts exactly', () => {
    expect(sameNumber('1.50', '15e-1')).toBe(true);
    expect(sameNumber('9007199254740993', '9007199254740992')).toBe(false);
    expect(sameNumber('-2.5e3', '-2500')).toBe(true);
  });
});
