import { attr, index, key, toStatePath } from './attribute-path';
import { maskSensitive, SENSITIVE_MASK } from './mask-sensitive';

const attributes = {
  id: 'db-1',
  password: 'hunter2',
  tags: { env: 'prod', token: 't0k3n' },
  rule: [
    { name: 'a', secret: 's-a' },
    { name: 'b', secret: 's-b' },
  ],
  nothing: null,
};

/** A path in the form terraform writes into sensitive_attributes. */
const sp = (...steps: (string | number | { key: string })[]) =>
  toStatePath(
    steps.reduce(
      (p, s) =>
        typeof s === 'number' ? index(p, s) : typeof s === 'string' ? attr(p, s) : key(p, s.key),
      [] as ReturnType<typeof attr>,
    ),
  );

describe('maskSensitive', () => {
  it('masks exactly the values terraform marked, at any depth', () => {
    const masked = maskSensitive(attributes, [
      sp('password'),
      sp('tags', { key: 'token' }),
      sp('rule', 1, 'secret'),
      sp('nothing'),
    ]);
    expect(masked).toEqual({
      id: 'db-1',
      password: SENSITIVE_MASK,
      tags: { env: 'prod', token: SENSITIVE_MASK },
      rule: [
        { name: 'a', secret: 's-a' },
        { name: 'b', secret: SENSITIVE_MASK },
      ],
      nothing: SENSITIVE_MASK,
    });
    expect(attributes.password).toBe('hunter2');
    expect(attributes.rule[1].secret).toBe('s-b');
  });

  it('masks a whole collection marked as a whole (a set)', () => {
    expect(maskSensitive(attributes, [sp('rule')]).rule).toBe(SENSITIVE_MASK);
  });

  it('shows everything when nothing is marked, and ignores paths to absent values', () => {
    expect(maskSensitive(attributes, [])).toEqual(attributes);
    expect(maskSensitive(attributes, undefined)).toEqual(attributes);
    expect(maskSensitive(attributes, [sp('gone'), sp('rule', 7, 'secret')])).toEqual(attributes);
  });

  it('masks more, never less, when a path has a step it cannot read', () => {
    const odd = [
      { type: 'get_attr', value: 'tags' },
      { type: 'future_step', value: 1 },
    ];
    expect(maskSensitive(attributes, [odd]).tags).toBe(SENSITIVE_MASK);
    expect(maskSensitive(attributes, [{ not: 'a path' }])).toBe(SENSITIVE_MASK);
  });
});
