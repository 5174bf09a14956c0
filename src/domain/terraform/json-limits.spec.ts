import { checkJsonValue, fitsNumeric, JsonLimitError, MAX_JSON_DEPTH } from './json-limits';

const nested = (levels: number) => JSON.parse('['.repeat(levels) + ']'.repeat(levels));

function problemOf(text: string): string | null {
  try {
    checkJsonValue(text, JSON.parse(text));
    return null;
  } catch (e) {
    if (!(e instanceof JsonLimitError)) throw e;
    return e.message;
  }
}

describe('JSON limits', () => {
  it('takes up to MAX_JSON_DEPTH levels, however deep JSON.parse went', () => {
    expect(() => checkJsonValue('', nested(MAX_JSON_DEPTH))).not.toThrow();
    expect(() => checkJsonValue('', nested(MAX_JSON_DEPTH + 1))).toThrow(
      'value nests deeper than 1000 levels',
    );
    // Far deeper than a recursive walk (or PostgreSQL) could go.
    expect(() => checkJsonValue('', nested(200_000))).toThrow(JsonLimitError);
  });

  it('names the first string or member name holding a lone surrogate', () => {
    expect(problemOf('{"a":["ok","x\\ud800"]}')).toBe('a[1] holds an unpaired UTF-16 surrogate');
    expect(problemOf('{"\\udfff":1}')).toBe('["\\udfff"] holds an unpaired UTF-16 surrogate');
    expect(problemOf('{"a":"\\ud83d\\ude00","b":"\\\\ud800"}')).toBeNull();
  });

  it('knows which numbers PostgreSQL numeric holds', () => {
    for (const ok of [
      '0',
      '1e131071',
      '-1e-16383',
      '0.5e-16382',
      '1e400',
      '18446744073709551616',
    ]) {
      expect([ok, fitsNumeric(ok)]).toEqual([ok, true]);
    }
    for (const bad of ['1e131072', '1.5e-16383', '-1e-16384', '1e1000000', '12e131071']) {
      expect([bad, fitsNumeric(bad)]).toEqual([bad, false]);
    }
  });
});
