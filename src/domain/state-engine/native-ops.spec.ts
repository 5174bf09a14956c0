import { rollbackResource, SliceInstance, stateMv, stateRm } from './native-ops';

function inst(address: string, module: string, name: string, key?: number | string): SliceInstance {
  return {
    address,
    resource: {
      module,
      mode: 'managed',
      type: 'terraform_data',
      name,
      provider: 'provider["terraform.io/builtin/terraform"]',
      each: null,
    },
    instance: {
      schema_version: 0,
      attributes: { id: address },
      ...(key === undefined ? {} : { index_key: key }),
    },
  };
}

describe('native operations', () => {
  it('rm deletes every instance found and reserves their resources', () => {
    const c = stateRm(
      ['terraform_data.a'],
      [inst('terraform_data.a[0]', '', 'a', 0), inst('terraform_data.a[1]', '', 'a', 1)],
    );
    expect(c.deletes).toEqual(['terraform_data.a[0]', 'terraform_data.a[1]']);
    expect(c.touched).toEqual(['terraform_data.a']);
    expect(() => stateRm(['terraform_data.z'], [])).toThrow(/nothing to remove/);
  });

  it('mv moves a module, keeping what lies below it', () => {
    const c = stateMv(
      'module.net',
      'module.core["x"]',
      [inst('module.net.module.sub.terraform_data.x', 'module.net.module.sub', 'x')],
      [],
    );
    expect(c.upserts.map((u) => [u.address, u.resource.module])).toEqual([
      ['module.core["x"].module.sub.terraform_data.x', 'module.core["x"].module.sub'],
    ]);
    expect(c.deletes).toEqual(['module.net.module.sub.terraform_data.x']);
    expect(c.touched).toEqual([
      'module.core["x"].module.sub.terraform_data.x',
      'module.net.module.sub.terraform_data.x',
    ]);
  });

  it('mv moves one instance to a new key, and refuses overwriting, kind or type changes', () => {
    const c = stateMv(
      'terraform_data.a[0]',
      'terraform_data.b["k"]',
      [inst('terraform_data.a[0]', '', 'a', 0)],
      [],
    );
    expect(c.upserts[0].address).toBe('terraform_data.b["k"]');
    expect(c.upserts[0].instance.index_key).toBe('k');
    expect(() =>
      stateMv(
        'terraform_data.a',
        'terraform_data.b',
        [inst('terraform_data.a', '', 'a')],
        [inst('terraform_data.b', '', 'b')],
      ),
    ).toThrow(/never overwrites/);
    expect(() =>
      stateMv('terraform_data.a', 'module.x', [inst('terraform_data.a', '', 'a')], []),
    ).toThrow(/cannot move a resource/);
    expect(() =>
      stateMv('terraform_data.a', 'null_resource.a', [inst('terraform_data.a', '', 'a')], []),
    ).toThrow(/keeps its mode and type/);
    expect(() => stateMv('terraform_data.a', 'terraform_data.b', [], [])).toThrow(
      /nothing to move/,
    );
  });

  it('rollback restores the instances of then and removes those that were not', () => {
    const c = rollbackResource(
      'terraform_data.a',
      3,
      [inst('terraform_data.a[0]', '', 'a', 0)],
      [inst('terraform_data.a[0]', '', 'a', 0), inst('terraform_data.a[1]', '', 'a', 1)],
    );
    expect(c.upserts.map((u) => u.address)).toEqual(['terraform_data.a[0]']);
    expect(c.deletes).toEqual(['terraform_data.a[1]']);
    expect(c.preview).toEqual(['~ terraform_data.a[0] (as at serial 3)', '- terraform_data.a[1]']);
    expect(() => rollbackResource('terraform_data.a', 1, [], [])).toThrow(
      /did not exist at serial 1/,
    );
  });
});
