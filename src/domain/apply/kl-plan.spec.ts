import {
  describeCounts,
  KL_PLAN_FORMAT,
  KL_PLAN_INVALID,
  klPlanFromJson,
  KlPlan,
  klPlanToJson,
} from './kl-plan';

const plan: KlPlan = {
  format: KL_PLAN_FORMAT,
  createdAt: '2026-11-30T12:00:00.000Z',
  server: 'http://127.0.0.1:8080',
  state: 'team/app',
  baseVersion: 7,
  baseSerial: 12,
  lineage: 'abc',
  terraformVersion: '1.11.4',
  configDir: '/work/app',
  files: ['slow_a.tf'],
  targets: [],
  refresh: true,
  variables: { slow_a_version: 'v2', n: 3 },
  changes: [{ address: 'terraform_data.slow_a', action: 'replace' }],
  writeSet: ['terraform_data.slow_a'],
  readSet: [],
  outputWrites: ['slow_a'],
  footprint: ['terraform_data.slow_a'],
  reservations: { write: ['terraform_data.slow_a', 'output.slow_a'], read: [] },
  counts: { create: 0, update: 0, replace: 1, delete: 0, forget: 0 },
  summary: '0 to create, 0 to update, 1 to replace, 0 to delete.',
  lane: 'full',
  laneReasons: ['protocol http'],
  scope: null,
};

const trusted: KlPlan = {
  ...plan,
  lane: 'state-engine',
  laneReasons: ['the server proved the scope safe'],
  scope: {
    provablySafe: true,
    unresolved: [{ candidate: 'terraform_data.support', classification: 'undeployed' }],
    closure: [{ address: 'terraform_data.base', direction: 'dependency', via: 'x.y' }],
    slice: { instances: 1, bytes: 512, stateInstances: 20_008 },
  },
};

describe('kl-plan.json', () => {
  it('round-trips through its snake_case file form', () => {
    const json = JSON.parse(JSON.stringify(klPlanToJson(plan)));
    expect(json).toMatchObject({
      base_version: 7,
      write_set: ['terraform_data.slow_a'],
      output_writes: ['slow_a'],
    });
    expect(klPlanFromJson(json)).toEqual(plan);
    expect(klPlanFromJson({ ...json, files: null, footprint: null })).toMatchObject({
      files: null,
      footprint: null,
    });
  });

  it('keeps the lane, why, and what scope expansion said', () => {
    const json = JSON.parse(JSON.stringify(klPlanToJson(trusted)));
    expect(json).toMatchObject({
      lane: 'state-engine',
      scope: { provably_safe: true, slice: { state_instances: 20_008 } },
    });
    expect(klPlanFromJson(json)).toEqual(trusted);
  });

  it('reads a plan file written before lanes as one for the full-trunk lane', () => {
    const json = JSON.parse(JSON.stringify(klPlanToJson(plan)));
    delete json.lane;
    delete json.lane_reasons;
    delete json.scope;
    expect(klPlanFromJson(json)).toMatchObject({ lane: 'full', laneReasons: [], scope: null });
  });

  it('refuses the trusted lane without a scope the server proved safe', () => {
    const json = JSON.parse(JSON.stringify(klPlanToJson(trusted)));
    json.scope.provably_safe = false;
    expect(() => klPlanFromJson(json)).toThrow(
      'lane state-engine needs a scope the server proved safe',
    );
    expect(() => klPlanFromJson({ ...json, scope: null })).toThrow('needs a scope');
  });

  it.each([
    [{ lane: 'fast' }, 'lane must be one of full, state-engine'],
    [{ scope: { provably_safe: 'yes' } }, 'scope.provably_safe must be true or false'],
    [{ format: 'other' }, 'format must be "kl-plan/1"'],
    [{ base_version: -1 }, 'base_version must be a non-negative integer'],
    [{ write_set: 'terraform_data.slow_a' }, 'write_set must be a list of strings'],
    [{ changes: [{ address: 'a.b', action: 'explode' }] }, 'a.b: unknown action'],
    [{ refresh: 'yes' }, 'refresh must be true or false'],
  ])('refuses %j', (patch, message) => {
    const json = { ...JSON.parse(JSON.stringify(klPlanToJson(plan))), ...patch };
    expect(() => klPlanFromJson(json)).toThrow(message);
    expect(() => klPlanFromJson(json)).toThrow(expect.objectContaining({ code: KL_PLAN_INVALID }));
  });

  it('summarises counts, naming forget only when there is some', () => {
    expect(describeCounts(plan.counts)).toBe('0 to create, 0 to update, 1 to replace, 0 to delete');
    expect(describeCounts({ ...plan.counts, forget: 2 })).toContain('2 to forget');
  });
});
