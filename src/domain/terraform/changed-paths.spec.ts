import { changedPaths, changedValues } from './changed-paths';

describe('changedPaths', () => {
  it('names nothing for equal values, whatever the key order', () => {
    expect(changedPaths({ a: 1, b: { c: [1, 2] } }, { b: { c: [1, 2] }, a: 1 })).toEqual([]);
  });

  it('names changed, added and removed leaves the way terraform prints paths', () => {
    const before = { id: 'x', tags: { Name: 'a', 'app.io/role': 'web' }, rules: [{ port: 80 }] };
    const after = {
      id: 'x',
      tags: { Name: 'b', 'app.io/role': 'db' },
      rules: [{ port: 443 }],
      new: true,
    };
    expect(changedPaths(before, after)).toEqual([
      'new',
      'rules[0].port',
      'tags.Name',
      'tags["app.io/role"]',
    ]);
  });

  it('reports a list whose length changed as a whole, and a type change at its path', () => {
    expect(changedPaths({ l: [1, 2], v: '1' }, { l: [1, 2, 3], v: 1 })).toEqual(['l', 'v']);
  });

  it('treats undefined members as absent', () => {
    expect(changedPaths({ a: 1, b: undefined }, { a: 1 })).toEqual([]);
    expect(changedPaths(null, { a: 1 })).toEqual(['(whole value)']);
  });
});

describe('changedValues', () => {
  it('gives each changed path with the value either side, absent as undefined', () => {
    expect(
      changedValues({ input: { value: 'a' }, gone: 1 }, { input: { value: 'b' }, new: [1] }),
    ).toEqual([
      {
        path: [{ kind: 'attribute', name: 'gone' }],
        rendered: 'gone',
        before: 1,
        after: undefined,
      },
      {
        path: [
          { kind: 'attribute', name: 'input' },
          { kind: 'attribute', name: 'value' },
        ],
        rendered: 'input.value',
        before: 'a',
        after: 'b',
      },
      {
        path: [{ kind: 'attribute', name: 'new' }],
        rendered: 'new',
        before: undefined,
        after: [1],
      },
    ]);
  });
});
