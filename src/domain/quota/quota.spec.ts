import { deciderSpec } from '../../../test/support/decider-spec';
import { parsePlanJson } from '../apply/plan-json';
import { CommandContext } from '../shared/event';
import { planResourceDelta } from './plan-delta';
import { QuotaCommand, quotaDecider, QuotaEvent } from './quota';
import {
  countedResources,
  describeVerdict,
  effectiveQuota,
  overrunOf,
  QuotaLimit,
  verdictOf,
} from './quota-limits';

const ctx: CommandContext = { actor: 'admin', correlationId: 'c', now: '2026-11-30T00:00:00Z' };
const spec = deciderSpec(quotaDecider);
const set = (glob: string, max: number, soft: number | null = null): QuotaCommand => ({
  type: 'SetQuota',
  data: { glob, maxResources: max, softResources: soft },
  metadata: ctx,
});
const setEvent = (glob: string, max: number, soft: number | null = null): QuotaEvent => ({
  type: 'QuotaSet',
  data: { glob, maxResources: max, softResources: soft },
});

describe('quota decider', () => {
  it('sets a quota, and changes it', () => {
    spec
      .given()
      .when(set('team-a/*', 10, 8))
      .then([setEvent('team-a/*', 10, 8)]);
    spec
      .given(setEvent('team-a/*', 10))
      .when(set('team-a/*', 20))
      .then([setEvent('team-a/*', 20)]);
  });

  it('records nothing when the same limits are set again', () => {
    spec
      .given(setEvent('team-a/*', 10, 8))
      .when(set('team-a/*', 10, 8))
      .then([]);
  });

  it.each([
    ['a hard limit below 1', set('a/*', 0)],
    ['a fractional limit', set('a/*', 2.5)],
    ['a limit above the maximum', set('a/*', 2_000_000_000)],
    ['a soft limit equal to the hard one', set('a/*', 5, 5)],
    ['a soft limit above the hard one', set('a/*', 5, 9)],
    ['a soft limit below 1', set('a/*', 5, 0)],
    ['a glob with a space', set('team a/*', 5)],
    ['a glob starting with /', set('/team/*', 5)],
    ['an empty glob', set('', 5)],
  ])('refuses %s with QUOTA.INVALID', (_what, command) => {
    spec.given().when(command).thenFails('QUOTA.INVALID');
  });

  it('removes a quota, and refuses to remove one that is not set', () => {
    const rm: QuotaCommand = { type: 'RemoveQuota', data: { glob: 'team-a/*' }, metadata: ctx };
    spec
      .given(setEvent('team-a/*', 10))
      .when(rm)
      .then([{ type: 'QuotaRemoved', data: { glob: 'team-a/*' } }]);
    spec.given().when(rm).thenFails('QUOTA.NOT_FOUND');
    const after = spec.given(setEvent('team-a/*', 10), {
      type: 'QuotaRemoved',
      data: { glob: 'team-a/*' },
    });
    expect(after.state.rules).toEqual({});
  });
});

describe('effectiveQuota: which of several matching globs governs a state', () => {
  const team: QuotaLimit = { glob: 'team-a/*', maxResources: 100, softResources: null };
  const prod: QuotaLimit = { glob: 'team-a/prod/*', maxResources: 500, softResources: null };
  const exact: QuotaLimit = { glob: 'team-a/prod/net', maxResources: 2, softResources: null };
  const all: QuotaLimit = { glob: '*', maxResources: 50, softResources: null };

  it('takes the most specific glob, even when its limit is higher', () => {
    expect(effectiveQuota([all, team, prod], 'team-a/prod/net')).toBe(prod);
    expect(effectiveQuota([prod, team, all], 'team-a/prod/net')).toBe(prod);
    expect(effectiveQuota([all, team], 'team-a/dev')).toBe(team);
  });

  it('lets an exact name beat every glob', () => {
    expect(effectiveQuota([all, team, prod, exact], 'team-a/prod/net')).toBe(exact);
  });

  it('breaks a tie in literal characters by fewer wildcards, then the lower limit', () => {
    const one: QuotaLimit = { glob: 'team-a/prod/*', maxResources: 9, softResources: null };
    const two: QuotaLimit = { glob: 'team-a/prod/**', maxResources: 1, softResources: null };
    const low: QuotaLimit = { glob: 'team-a/*/net', maxResources: 3, softResources: null };
    const high: QuotaLimit = { glob: 'team-a/prod*', maxResources: 4, softResources: null };
    expect(effectiveQuota([two, one], 'team-a/prod/net')).toBe(one);
    expect(effectiveQuota([high, low], 'team-a/prod/net')).toBe(low);
    expect(effectiveQuota([low, high], 'team-a/prod/net')).toBe(low);
  });

  it('finds none when no glob matches', () => {
    expect(effectiveQuota([team, prod], 'team-b/x')).toBeUndefined();
  });
});

describe('counting and limits', () => {
  it('counts managed instances, not data sources or deposed objects', () => {
    expect(
      countedResources([
        'aws_instance.a',
        'aws_instance.b[0]',
        'module.data.aws_instance.c["data.x"]',
        'data.aws_ami.x',
        'module.m[1].data.aws_ami.y',
        'aws_instance.a (deposed object 1234abcd)',
      ]),
    ).toBe(3);
  });

  it('is over a limit only when strictly above it', () => {
    const q: QuotaLimit = { glob: '*', maxResources: 10, softResources: 8 };
    expect([8, 9, 10, 11].map((n) => overrunOf(q, n))).toEqual([null, 'soft', 'soft', 'hard']);
    expect(overrunOf({ ...q, softResources: null }, 9)).toBeNull();
  });

  it('judges a projected count and says so in one line', () => {
    const q: QuotaLimit = { glob: 'team-a/*', maxResources: 10, softResources: 8 };
    const over = verdictOf(q, 9, 3);
    expect(over).toMatchObject({ projected: 12, level: 'hard' });
    expect(describeVerdict('team-a/x', over)).toBe(
      'state team-a/x would hold 12 resources (now 9, +3), over the hard limit 10 of quota team-a/*',
    );
    expect(verdictOf(q, 9, -1)).toMatchObject({ projected: 8, level: null });
    expect(verdictOf(null, 9, 100)).toMatchObject({ projected: 109, level: null });
  });
});

describe('planResourceDelta: creates − deletes, replacements neutral', () => {
  const change = (address: string, actions: string[], extra: object = {}) => ({
    address,
    mode: address.startsWith('data.') ? 'data' : 'managed',
    change: { actions, ...extra },
  });

  it('counts creates, deletes, forgets and imports of managed resources', () => {
    const plan = parsePlanJson({
      format_version: '1.2',
      resource_changes: [
        change('terraform_data.a[0]', ['create']),
        change('terraform_data.a[1]', ['create']),
        change('terraform_data.b', ['delete']),
        change('terraform_data.c', ['delete', 'create']),
        change('terraform_data.d', ['create', 'delete']),
        change('terraform_data.e', ['update']),
        change('terraform_data.f', ['forget']),
        change('terraform_data.g', ['no-op'], { importing: { id: 'g' } }),
        change('terraform_data.h', ['no-op']),
        change('data.external.x', ['read']),
        { ...change('terraform_data.c', ['delete']), deposed: 'abcd' },
      ],
    });
    expect(planResourceDelta(plan.changes)).toEqual({
      creates: 2,
      deletes: 2,
      imports: 1,
      delta: 1,
    });
  });
});
