import { canonicalHash } from './canonical-hash';
import { parseJsonLossless } from './lossless-json';
import { InstanceObjectV4 } from './state-document';
import { instanceHash, ResourceDescriptor } from './state-instances';

describe('instanceHash', () => {
  const resource: ResourceDescriptor = {
    module: 'module.a["x"]',
    mode: 'managed',
    type: 'aws_s3_bucket',
    name: 'b',
    provider: 'provider["registry.terraform.io/hashicorp/aws"]',
    each: 'map',
  };
  const instance = {
    index_key: 'x',
    schema_version: 1,
    attributes: {
      tags: { Name: 'web', Env: 'prod' },
      input: { value: { b: 1, a: [1, 2] }, type: ['object', { a: 'list', b: 'number' }] },
      big: parseJsonLossless('123456789012345678901234567890'),
    },
    sensitive_attributes: [],
    dependencies: ['aws_iam_role.r'],
  } as unknown as InstanceObjectV4;

  it('is the hash stored in every event so far: a changed digest would reopen every lifecycle', () => {
    expect(instanceHash(resource, instance)).toBe(
      '8543bb4fc62e849cc9d673da53f16196f215d7d3a2d4a01fc43fd0718912ad90',
    );
  });

  it('is the canonical hash of the resource and the instance together', () => {
    const extra = { ...resource, extra: { for_each_note: [3, { z: 1, a: 2 }] } };
    const deposed = { ...instance, deposed: 'ab12', status: 'tainted' } as InstanceObjectV4;
    for (const r of [resource, extra, { ...resource, module: '', each: null }]) {
      for (const i of [instance, deposed]) {
        expect(instanceHash(r, i)).toBe(canonicalHash({ resource: { ...r }, instance: i }));
      }
    }
  });
});
