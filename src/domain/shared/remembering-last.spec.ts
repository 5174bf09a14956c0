import { rememberingLast } from './remembering-last';

describe('rememberingLast', () => {
  it('computes again only for another object, and answers as compute does', () => {
    const seen: object[] = [];
    const size = rememberingLast((o: { n: number }) => {
      seen.push(o);
      return o.n * 2;
    });
    const a = { n: 1 };
    const b = { n: 1 };
    expect([size(a), size(a), size(b), size(a)]).toEqual([2, 2, 2, 2]);
    expect(seen).toEqual([a, b, a]);
    expect(seen[1]).toBe(b);
  });
});
