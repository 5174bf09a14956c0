/**
 * Terraform sorts with Go's `<` on strings, which compares UTF-8 bytes. That
 * equals code-point order, but not JavaScript's UTF-16 code-unit order once
 * astral characters meet U+E000..U+FFFF, so compare code points.
 */
export function compareGoStrings(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    const xs = x >= 0xd800 && x <= 0xdfff;
    const ys = y >= 0xd800 && y <= 0xdfff;
    if (xs === ys) return x - y;
    // A surrogate (astral code point) sorts after every BMP character.
    return xs ? 1 : -1;
  }
  return a.length - b.length;
}
