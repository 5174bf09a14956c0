import { jsonbText } from './jsonb-text';

describe('jsonbText', () => {
  it('replaces NUL characters in strings and keys with U+FFFD', () => {
    expect(JSON.parse(jsonbText({ 'k\u0000': ['a\u0000b', 1] }))).toEqual({
      'k\uFFFD': ['a\uFFFDb', 1],
    });
  });

  it('leaves the literal text "\\u0000" (a backslash, then u0000) alone', () => {
    const value = { path: 'C:\\u0000', both: '\\\u0000' };
    expect(JSON.parse(jsonbText(value))).toEqual({ path: 'C:\\u0000', both: '\\\uFFFD' });
  });

  it('is plain JSON.stringify when there is no NUL', () => {
    const value = { a: [1, 'two', { three: null }] };
    expect(jsonbText(value)).toBe(JSON.stringify(value));
  });
});
