import { jsonbText, textParam } from './jsonb-text';

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

describe('jsonbText and textParam: what jsonb and text columns can hold', () => {
  it('turns lone surrogates into U+FFFD and keeps pairs', () => {
    expect(JSON.parse(jsonbText({ a: 'x\ud800', b: '\udc00y', c: '😀', '\ud801': 1 }))).toEqual({
      a: 'x\uFFFD',
      b: '\uFFFDy',
      c: '😀',
      '\uFFFD': 1,
    });
  });

  it('makes a text parameter storable and leaves storable text as it is', () => {
    expect(textParam('evil\u0000who\ud800')).toBe('evil\uFFFDwho\uFFFD');
    expect(textParam('plain 😀')).toBe('plain 😀');
    expect(textParam(null)).toBeNull();
  });
});
