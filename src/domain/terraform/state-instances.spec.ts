import { canonicalHash } from './canonical-hash';
import { parseJsonLossless } from './lossless-json';
import { parseStateDocument } from './parse-state-document';
import { InstanceObjectV4, StateDocumentV4 } from './state-document';
import { flattenInstances, instanceHash, ResourceDescriptor } from './state-instances';

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

describe('flattenInstances of an accepted document', () => {
  const text = JSON.stringify({
    version: 4,
    terraform_version: '1.11.4',
    serial: 1,
    lineage: 'l',
    outputs: {},
    resources: [
      {
        module: 'module.m["a"]',
        mode: 'managed',
        type: 't',
        name: 'x',
        each: 'map',
        provider: 'provider["p"]',
        instances: [
          { index_key: 'k "1"', schema_version: 0, attributes: { id: '1' } },
          { index_key: 'k2', deposed: 'd1', schema_version: 0, attributes: { id: '2' } },
        ],
      },
      {
        mode: 'data',
        type: 't',
        name: 'y',
        provider: 'provider["p"]',
        instances: [{ index_key: 0, schema_version: 0, attributes: { id: '3' } }],
      },
    ],
  });
  const addresses = (doc: StateDocumentV4) => flattenInstances(doc).map((i) => i.address);

  it('has the addresses its checks spelled', () => {
    expect(addresses(parseStateDocument(text))).toEqual([
      'module.m["a"].t.x["k \\"1\\""]',
      'module.m["a"].t.x["k2"] (deposed object d1)',
      'data.t.y[0]',
    ]);
  });

  it('spells them anew for a resource changed since it was accepted', () => {
    const moved = parseStateDocument(text);
    moved.resources[0].instances.splice(0, 1);
    moved.resources[1].name = 'z';
    expect(addresses(moved)).toEqual([
      'module.m["a"].t.x["k2"] (deposed object d1)',
      'data.t.z[0]',
    ]);
    const swapped = parseStateDocument(text);
    const [a, b] = swapped.resources[0].instances;
    swapped.resources[0].instances = [b, a];
    expect(addresses(swapped)).toEqual([
      'module.m["a"].t.x["k2"] (deposed object d1)',
      'module.m["a"].t.x["k \\"1\\""]',
      'data.t.y[0]',
    ]);
  });
});
