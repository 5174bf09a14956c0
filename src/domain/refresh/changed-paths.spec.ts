import { changedPaths } from './changed-paths';

describe('changedPaths for refresh results', () => {
  it('names the nested attribute a provider read changed, as terraform prints it', () => {
    const before = {
      bucket: 'logs',
      versioning_configuration: [{ status: 'Enabled', mfa_delete: 'Disabled' }],
      tags: { Name: 'logs', Team: 'core' },
    };
    const after = {
      bucket: 'logs',
      versioning_configuration: [{ status: 'Suspended', mfa_delete: 'Disabled' }],
      tags: { Name: 'renamed', Team: 'core' },
    };
    expect(changedPaths(before, after)).toEqual([
      'tags.Name',
      'versioning_configuration[0].status',
    ]);
  });

  it('names an attribute that appeared or vanished', () => {
    expect(changedPaths({ id: 'a', arn: 'x' }, { id: 'a', tags: { k: 'v' } })).toEqual([
      'arn',
      'tags',
    ]);
  });

  it('names nothing when only key order differs', () => {
    expect(changedPaths({ a: 1, b: [{ c: 2 }] }, { b: [{ c: 2 }], a: 1 })).toEqual([]);
  });
});
