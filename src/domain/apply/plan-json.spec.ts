import { DomainError } from '../shared/domain-error';
import { recordedPlan } from './__fixtures__/fixtures';
import {
  changeKind,
  countChanges,
  isWrite,
  parsePlanJson,
  PLAN_INVALID,
  writeSetOf,
} from './plan-json';

describe('parsePlanJson (recorded terraform 1.11 plan)', () => {
  const plan = parsePlanJson(recordedPlan());

  it('reads every change with its kind, instance and configuration address', () => {
    const byAddress = new Map(plan.changes.map((c) => [c.address, c]));
    expect(byAddress.get('terraform_data.slow_a')?.kind).toBe('replace');
    expect(byAddress.get('terraform_data.new[0]')?.kind).toBe('create');
    expect(byAddress.get('terraform_data.old[0]')?.kind).toBe('delete');
    expect(byAddress.get('module.web.terraform_data.server[1]')).toMatchObject({
      kind: 'update',
      configAddress: 'module.web.terraform_data.server',
      mode: 'managed',
    });
    expect(byAddress.get('module.db.terraform_data.replica["eu"]')).toMatchObject({
      kind: 'no-op',
      configAddress: 'module.db.terraform_data.replica',
    });
  });

  it('writes everything but no-ops, sorted', () => {
    expect(writeSetOf(plan)).toEqual([
      'module.web.terraform_data.server[0]',
      'module.web.terraform_data.server[1]',
      'terraform_data.new[0]',
      'terraform_data.old[0]',
      'terraform_data.slow_a',
    ]);
  });

  it('counts managed changes the way the summary prints them', () => {
    expect(countChanges(plan.changes)).toEqual({
      create: 1,
      update: 2,
      replace: 1,
      delete: 1,
      forget: 0,
    });
  });

  // -var values stay strings in the plan; terraform converts them again when they come back.
  it('keeps output changes and the root variables terraform planned with', () => {
    expect(plan.outputChanges).toEqual([
      { name: 'slow_a', kind: 'update' },
      { name: 'web_url', kind: 'no-op' },
    ]);
    expect(plan.variables).toMatchObject({
      slow_a_version: 'v2',
      web_image: 'web:2',
      with_new: 'true',
    });
    expect(plan.terraformVersion).toMatch(/^1\.11\./);
  });

  it('names deposed objects the way state does', () => {
    const raw = recordedPlan() as { resource_changes: Record<string, unknown>[] };
    raw.resource_changes.push({
      address: 'terraform_data.slow_a',
      mode: 'managed',
      type: 'terraform_data',
      name: 'slow_a',
      deposed: '00000001',
      change: { actions: ['delete'] },
    });
    const changes = parsePlanJson(raw).changes.filter(
      (c) => c.instance === 'terraform_data.slow_a',
    );
    expect(changes.map((c) => c.address)).toEqual([
      'terraform_data.slow_a',
      'terraform_data.slow_a (deposed object 00000001)',
    ]);
  });

  it.each([
    [null, 'not a JSON object'],
    [{}, 'no format_version'],
    [{ format_version: '2.0' }, 'unsupported format_version'],
    [{ format_version: '1.2', resource_changes: {} }, 'resource_changes must be a list'],
    [{ format_version: '1.2', resource_changes: [{ address: 'a.b' }] }, 'no address or change'],
    [
      {
        format_version: '1.2',
        resource_changes: [{ address: 'a.b', change: { actions: ['explode'] } }],
      },
      'unknown change actions',
    ],
  ])('refuses %j', (raw, message) => {
    expect(() => parsePlanJson(raw)).toThrow(message);
    try {
      parsePlanJson(raw);
    } catch (e) {
      expect((e as DomainError).code).toBe(PLAN_INVALID);
    }
  });
});

describe('changeKind', () => {
  it.each([
    [['no-op'], 'no-op', false],
    [['read'], 'read', false],
    [['create'], 'create', true],
    [['update'], 'update', true],
    [['delete'], 'delete', true],
    [['forget'], 'forget', true],
    [['delete', 'create'], 'replace', true],
    [['create', 'delete'], 'replace', true],
  ])('%j is %s (write: %s)', (actions, kind, write) => {
    expect(changeKind(actions)).toBe(kind);
    expect(isWrite(changeKind(actions))).toBe(write);
  });
});
