import { compareGoStrings } from './go-string-order';

describe('compareGoStrings', () => {
  it('orders by code point (UTF-8 bytes), not by UTF-16 code unit', () => {
    // U+FF21 (fullwidth A) is one UTF-16 unit above the surrogates of U+1F600,
    // but its UTF-8 bytes (EF BC A1) sort before F0 9F 98 80.
    expect('\uff21' > '😀').toBe(true);
    expect(compareGoStrings('\uff21', '😀')).toBeLessThan(0);
    expect(compareGoStrings('😀', '\uff21')).toBeGreaterThan(0);
  });

  it('agrees with plain comparison on ASCII, prefixes first', () => {
    expect(['b', 'a[10]', 'a[2]', 'a', ''].sort(compareGoStrings)).toEqual([
      '',
      'a',
      'a[10]',
      'a[2]',
      'b',
    ]);
    expect(compareGoStrings('same', 'same')).toBe(0);
  });
});
