import {
  flattenInstances,
  instanceHash,
  InstanceObjectV4,
  ResourceDescriptor,
  StateDocumentV4,
} from '../../domain/terraform';
import { InstanceHashMemo } from './instance-hash-memo';

const AWS = 'provider["registry.terraform.io/hashicorp/aws"]';

function doc(a: string, b = 'b', provider = AWS): StateDocumentV4 {
  const object = (id: string): InstanceObjectV4 => ({
    schema_version: 0,
    attributes: { id, tags: { Name: id } },
    sensitive_attributes: [],
  });
  return {
    version: 4,
    terraform_version: '1.11.4',
    serial: 1,
    lineage: 'l',
    outputs: {},
    resources: [
      { mode: 'managed', type: 'aws_s3_bucket', name: 'a', provider, instances: [object(a)] },
      { mode: 'managed', type: 'aws_s3_bucket', name: 'b', provider: AWS, instances: [object(b)] },
    ],
  };
}

/** A memo that records which addresses it had to hash. */
function counting(maxInstances?: number) {
  const hashed: string[] = [];
  const memo = new InstanceHashMemo({
    maxInstances,
    hash: (resource: ResourceDescriptor, instance: InstanceObjectV4) => {
      hashed.push(`${resource.name}:${String(instance.attributes?.id)}`);
      return instanceHash(resource, instance);
    },
  });
  /** Flattens `d` as commit to `key` would; returns what had to be hashed. */
  const commit = (key: string, d: StateDocumentV4) => {
    hashed.length = 0;
    const { hash, known, made, done } = memo.open(key);
    const flat = flattenInstances(d, hash, known, made);
    done(flat);
    // What the memo answers by identity next time is a flat instance made now,
    // not a copy (the last one, where a document lists one object twice).
    const last = new Map(flat.map((f) => [f.instance, f]));
    for (const [instance, f] of last) expect(known(instance)).toBe(f);
    expect(flat).toEqual(flattenInstances(d));
    return [...hashed];
  };
  return commit;
}

describe('InstanceHashMemo', () => {
  it('hashes only the instances whose JSON or resource fields changed', () => {
    const commit = counting();
    expect(commit('s', doc('x'))).toEqual(['a:x', 'b:b']);
    expect(commit('s', doc('x'))).toEqual([]);
    expect(commit('s', doc('y'))).toEqual(['a:y']);
    expect(commit('s', doc('y', 'b', 'provider["other"]'))).toEqual(['a:y']);
    expect(commit('s', doc('y', 'c'))).toEqual(['a:y', 'b:c']);
  });

  it('keeps one memo per state', () => {
    const commit = counting();
    commit('s', doc('x'));
    expect(commit('t', doc('x'))).toEqual(['a:x', 'b:b']);
    expect(commit('s', doc('x'))).toEqual([]);
  });

  it('forgets the least recently committed state beyond its bound', () => {
    const commit = counting(3);
    commit('s', doc('x'));
    commit('t', doc('x'));
    expect(commit('s', doc('x'))).toEqual(['a:x', 'b:b']);
    expect(commit('s', doc('x'))).toEqual([]);
  });

  it('keeps no memo of a state larger than its bound, and drops the one it had', () => {
    const commit = counting(2);
    commit('s', doc('x'));
    expect(commit('s', doc('x'))).toEqual([]);
    const big = doc('x');
    big.resources.push({ ...big.resources[1], name: 'c' });
    commit('s', big);
    expect(commit('s', doc('x'))).toEqual(['a:x', 'b:b']);
  });

  it('answers instance objects shared with the last commit by identity, under an equal resource only', () => {
    const commit = counting();
    const first = doc('x');
    commit('s', first);
    // The next document shares `a`'s and `b`'s objects (what the reusing parse does).
    const shared: StateDocumentV4 = {
      ...first,
      resources: first.resources.map((r) => ({ ...r, instances: [...r.instances] })),
    };
    expect(commit('s', shared)).toEqual([]);
    // The same object under another provider is another instance: hashed again.
    const moved: StateDocumentV4 = {
      ...shared,
      resources: [{ ...shared.resources[0], provider: 'provider["other"]' }, shared.resources[1]],
    };
    expect(commit('s', moved)).toEqual(['a:x']);
    // Back under its provider (the memo knew it under the other one last), and
    // the same object under another name: another address; both hashed.
    const renamed: StateDocumentV4 = {
      ...shared,
      resources: [shared.resources[0], { ...shared.resources[1], name: 'c' }],
    };
    expect(commit('s', renamed)).toEqual(['a:x', 'c:b']);
  });
});
