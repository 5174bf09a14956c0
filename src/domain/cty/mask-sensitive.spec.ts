import { attr, index, key, toStatePath } from './attribute-path';
import { maskSensitive, SENSITIVE_MASK, touchesSensitive } from './mask-sensitive';

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

describe('touchesSensitive', () => {
  const marks = [sp('password'), sp('tags', { key: 'token' }), sp('rule', 1, 'secret')];

  it('is true at a marked path, below it, and above it (a value holding a marked one)', () => {
    expect(touchesSensitive(attr([], 'password'), marks)).toBe(true);
    expect(touchesSensitive(attr(attr([], 'password'), 'x'), marks)).toBe(true);
    expect(touchesSensitive(attr([], 'tags'), marks)).toBe(true);
    // State JSON does not tell a map from an object: tags.token is tags["token"].
    expect(touchesSensitive(attr(attr([], 'tags'), 'token'), marks)).toBe(true);
    expect(touchesSensitive(index(attr([], 'rule'), 1), marks)).toBe(true);
  });

  it('is false beside a marked path, and when nothing is marked', () => {
    expect(touchesSensitive(attr([], 'id'), marks)).toBe(false);
    expect(touchesSensitive(key(attr([], 'tags'), 'env'), marks)).toBe(false);
    expect(touchesSensitive(attr(index(attr([], 'rule'), 0), 'secret'), marks)).toBe(false);
    expect(touchesSensitive(attr([], 'password'), null)).toBe(false);
  });
});
