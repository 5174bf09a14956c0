import { sameJson } from './json-value';

describe('sameJson', () => {
  const base = JSON.parse(
    '{"id":"i-1","tags":{"Name":"web"},"ports":[80,443],"on":true,"none":null,"n":-0}',
  ) as Record<string, unknown>;

  it('holds for equal values parsed apart', () => {
    expect(sameJson(base as never, JSON.parse(JSON.stringify(base)))).toBe(true);
  });

  it.each<[string, unknown]>([
    ['a changed string', { ...base, id: 'i-2' }],
    ['a changed nested value', { ...base, tags: { Name: 'db' } }],
    ['an array in another order', { ...base, ports: [443, 80] }],
    ['a longer array', { ...base, ports: [80, 443, 8080] }],
    ['a number turned string', { ...base, ports: [80, '443'] }],
    ['null turned object', { ...base, none: {} }],
    ['an array turned object', { ...base, ports: { 0: 80, 1: 443 } }],
    ['an added member', { ...base, extra: null }],
    ['members in another order', { tags: base.tags, ...base }],
  ])('fails for %s', (_label, other) => {
    expect(sameJson(base as never, other as never)).toBe(false);
  });
});
