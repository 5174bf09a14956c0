import { StateDocumentV4 } from '../terraform';
import { recordedState } from './__fixtures__/fixtures';
import { applyDelta, sliceOf } from './state-slice';

function clone(doc: StateDocumentV4): StateDocumentV4 {
  return JSON.parse(JSON.stringify(doc)) as StateDocumentV4;
}

function instance(
  doc: StateDocumentV4,
  module: string | undefined,
  name: string,
  key?: number | string,
) {
  const r = doc.resources.find((x) => x.module === module && x.name === name)!;
  return r.instances.find((i) => i.index_key === key)!;
}

describe('sliceOf', () => {
  const trunk = recordedState();

  it('keeps the whole trunk for an unscoped configuration', () => {
    expect(sliceOf(trunk, null)).toBe(trunk);
  });

  it('keeps the described root resources and everything under described module calls', () => {
    const slice = sliceOf(trunk, ['module.web', 'terraform_data.slow_a']);
    expect(slice.resources.map((r) => `${r.module ?? 'root'}|${r.name}`).sort()).toEqual([
      'module.web|lb',
      'module.web|server',
      'root|slow_a',
    ]);
    expect(slice.serial).toBe(trunk.serial);
    expect(slice.lineage).toBe(trunk.lineage);
    expect(slice.outputs).toEqual(trunk.outputs);
  });

  it('matches a module call exactly, not by name prefix', () => {
    expect(sliceOf(trunk, ['module.we']).resources).toEqual([]);
  });
});

describe('applyDelta', () => {
  const slice = recordedState();

  it('commits the write set only, and ignores re-serialised untouched instances', () => {
    const result = clone(slice);
    result.serial += 1;
    // terraform writes attributes with sorted keys: same object, other bytes
    const subnet = instance(result, 'module.network', 'subnet');
    subnet.attributes = Object.fromEntries(Object.entries(subnet.attributes!).reverse());
    instance(result, undefined, 'slow_a').attributes!.input = 'kl-demo-a-v2';
    const delta = applyDelta({
      slice,
      result,
      writeSet: ['terraform_data.slow_a'],
      outputWrites: [],
    });
    expect(delta.violations).toEqual([]);
    expect(delta.upserts.map((u) => u.address)).toEqual(['terraform_data.slow_a']);
    expect(delta.upserts[0].instance.attributes!.input).toBe('kl-demo-a-v2');
    expect(delta.upserts[0].resource).toMatchObject({
      module: '',
      type: 'terraform_data',
      name: 'slow_a',
    });
    expect(delta.deletes).toEqual([]);
  });

  it('deletes write-set instances terraform removed', () => {
    const result = clone(slice);
    result.resources = result.resources.filter((r) => r.name !== 'old');
    const delta = applyDelta({
      slice,
      result,
      writeSet: ['terraform_data.old[0]'],
      outputWrites: [],
    });
    expect(delta.deletes).toEqual(['terraform_data.old[0]']);
    expect(delta.violations).toEqual([]);
  });

  it('calls any other change a violation', () => {
    const result = clone(slice);
    instance(result, 'module.db', 'replica', 'eu').attributes!.input = { region: 'mars' };
    result.resources = result.resources.filter((r) => r.name !== 'old');
    const delta = applyDelta({
      slice,
      result,
      writeSet: ['terraform_data.slow_a'],
      outputWrites: [],
    });
    expect(delta.violations).toEqual([
      'module.db.terraform_data.replica["eu"] (changed outside the write set)',
      'terraform_data.old[0] (removed outside the write set)',
    ]);
  });

  it('commits allowed output changes, refuses others, and leaves undeclared outputs alone', () => {
    const result = clone(slice);
    result.outputs.slow_a = { value: 'kl-demo-a-v2', type: 'string' };
    delete result.outputs.web_url;
    result.outputs.surprise = { value: 1, type: 'number' };
    const allowed = applyDelta({ slice, result, writeSet: [], outputWrites: ['slow_a'] });
    expect(allowed.outputs).toEqual({
      set: { slow_a: { value: 'kl-demo-a-v2', type: 'string' } },
      remove: [],
    });
    // web_url vanished because a scoped configuration does not declare it: not a change.
    expect(allowed.violations).toEqual(['output surprise (changed outside the write set)']);
    const removal = applyDelta({
      slice,
      result: { ...result, outputs: {} },
      writeSet: [],
      outputWrites: ['web_url'],
    });
    expect(removal.outputs.remove).toEqual(['web_url']);
  });

  it('never commits data sources, which every run re-reads', () => {
    const withData = clone(slice);
    withData.resources.push({
      mode: 'data',
      type: 'terraform_remote_state',
      name: 'other',
      provider: 'provider["terraform.io/builtin/terraform"]',
      instances: [{ schema_version: 0, attributes: { n: 1 } }],
    });
    const result = clone(withData);
    result.resources[result.resources.length - 1].instances[0].attributes = { n: 2 };
    const delta = applyDelta({ slice: withData, result, writeSet: [], outputWrites: [] });
    expect(delta).toEqual({
      upserts: [],
      deletes: [],
      outputs: { set: {}, remove: [] },
      violations: [],
    });
  });
});
