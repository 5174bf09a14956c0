import { deciderSpec } from '../../../test/support/decider-spec';
import { QuotaLimit } from '../quota/quota-limits';
import { CommandContext } from '../shared/event';
import { InstanceObjectV4, ResourceV4, StateDocumentV4 } from '../terraform/state-document';
import { flattenInstances } from '../terraform/state-instances';
import { LockInfo } from './lock-info';
import { CommitState, StateCommand } from './state.commands';
import { stateDecider } from './state.decider';
import { QuotaExceeded, StateEvent } from './state.events';

const ctx: CommandContext = { actor: 'alice', correlationId: 'c', now: '2026-11-30T00:00:00.000Z' };
const NAME = 'team-a/prod';
const PROVIDER = 'provider["terraform.io/builtin/terraform"]';
const spec = deciderSpec(stateDecider);

const QUOTA: QuotaLimit = { glob: 'team-a/*', maxResources: 3, softResources: 2 };

function objects(n: number, deposed?: string): InstanceObjectV4[] {
  return Array.from({ length: n }, (_, i) => ({
    index_key: i,
    ...(deposed === undefined ? {} : { deposed: `${deposed}${i}` }),
    schema_version: 0,
    attributes: { id: `id-${i}` },
    sensitive_attributes: [],
  }));
}

function resource(mode: 'managed' | 'data', name: string, n: number, deposed?: string): ResourceV4 {
  return {
    mode,
    type: 'terraform_data',
    name,
    provider: PROVIDER,
    each: 'list',
    instances: objects(n, deposed),
  };
}

/** `managed` counted instances, plus data sources and deposed objects that do not count. */
function doc(serial: number, managed: number, extras = true): StateDocumentV4 {
  return {
    version: 4,
    terraform_version: '1.11.4',
    serial,
    lineage: 'l-1',
    outputs: {},
    resources: [
      resource('managed', 'web', managed),
      ...(extras ? [resource('data', 'lookup', 4), resource('managed', 'old', 2, 'dead')] : []),
    ],
    check_results: null,
  };
}

const commit = (d: StateDocumentV4, quota?: QuotaLimit, lockId?: string): CommitState => ({
  type: 'CommitState',
  data: {
    name: NAME,
    newStateId: 'sid',
    document: d,
    instances: flattenInstances(d),
    source: 'http',
    checksum: `sum-${d.serial}`,
    ...(lockId === undefined ? {} : { lockId }),
    ...(quota === undefined ? {} : { quota }),
  },
  metadata: ctx,
});

function lockInfo(id: string, operation: string): LockInfo {
  return { ID: id, Operation: operation, Who: 'alice@laptop', Version: '1.11.4', Info: '' };
}

const lock = (id: string, operation: string, quota?: QuotaLimit): StateCommand => ({
  type: 'LockState',
  data: {
    name: NAME,
    newStateId: 'sid',
    lockInfo: lockInfo(id, operation),
    ...(quota ? { quota } : {}),
  },
  metadata: ctx,
});

/** The history of a state committed with `managed` counted resources, without a quota. */
function committed(managed: number): StateEvent[] {
  return spec.eventsOf([], commit(doc(1, managed)));
}

function overruns(events: StateEvent[]): QuotaExceeded['data'][] {
  return events.filter((e): e is QuotaExceeded => e.type === 'QuotaExceeded').map((e) => e.data);
}

describe('State decider: quotas on commits (never refused, overruns recorded)', () => {
  it('stores a commit over the hard limit and records the overrun with the version', () => {
    const events = spec
      .given(committed(1))
      .when(commit(doc(2, 5), QUOTA))
      .events();
    expect(events.some((e) => e.type === 'ApplyCommitted')).toBe(true);
    expect(overruns(events)).toEqual([
      {
        stateId: 'sid',
        name: NAME,
        version: 2,
        glob: 'team-a/*',
        level: 'hard',
        limit: 3,
        count: 5,
      },
    ]);
  });

  it('records a soft overrun between the soft and the hard limit', () => {
    const events = spec
      .given(committed(1))
      .when(commit(doc(2, 3), QUOTA))
      .events();
    expect(overruns(events)).toEqual([
      expect.objectContaining({ level: 'soft', limit: 2, count: 3, version: 2 }),
    ]);
  });

  it('counts managed instances only: data sources and deposed objects are not resources', () => {
    // 2 managed + 4 data + 2 deposed: at the soft limit, not over it.
    expect(
      overruns(
        spec
          .given(committed(1))
          .when(commit(doc(2, 2), QUOTA))
          .events(),
      ),
    ).toEqual([]);
  });

  it('records nothing without a quota, or within it', () => {
    expect(
      overruns(
        spec
          .given(committed(1))
          .when(commit(doc(2, 9)))
          .events(),
      ),
    ).toEqual([]);
    expect(
      overruns(
        spec
          .given(committed(1))
          .when(commit(doc(2, 1), QUOTA))
          .events(),
      ),
    ).toEqual([]);
  });

  it('records the first commit of a new state too', () => {
    const events = spec
      .given()
      .when(commit(doc(1, 4, false), QUOTA))
      .events();
    expect(events[0].type).toBe('StateCreated');
    expect(overruns(events)).toEqual([expect.objectContaining({ version: 1, level: 'hard' })]);
  });
});

describe('State decider: apply locks on a state over its hard limit', () => {
  it('refuses an apply lock with a LockInfo that names the quota and the count', () => {
    spec
      .given(committed(4))
      .when(lock('l-1', 'OperationTypeApply', QUOTA))
      .thenFails('QUOTA.EXCEEDED', {
        holder: {
          ID:
            'quota exceeded: state team-a/prod holds 4 resources, over the hard limit 3 of quota ' +
            'team-a/*; plans still work, an admin can raise it (kl quota set)',
          Operation: 'OperationTypeApply',
          Who: 'kilolock quota team-a/* (max 3 resources, state holds 4)',
          Info: expect.stringContaining('over the hard limit 3 of quota team-a/*'),
          Version: '',
          Created: ctx.now,
          Path: NAME,
        },
      });
  });

  it('grants plan locks and other operations (state push, import) over the limit', () => {
    for (const op of ['OperationTypePlan', 'OperationTypeInvalid', 'OperationTypeImport']) {
      const events = spec
        .given(committed(4))
        .when(lock('l-1', op, QUOTA))
        .events();
      expect(events.map((e) => e.type)).toEqual(['LockAcquired']);
    }
  });

  it('grants an apply lock at the limit, over only the soft limit, or without a quota', () => {
    for (const [managed, quota] of [
      [3, QUOTA],
      [9, undefined],
    ] as const) {
      const events = spec.given(committed(managed)).when(lock('l', 'OperationTypeApply', quota));
      expect(events.events().map((e) => e.type)).toEqual(['LockAcquired']);
    }
  });

  it('grants the apply again once the limit is raised (the way out)', () => {
    const raised = { ...QUOTA, maxResources: 10 };
    const events = spec
      .given(committed(4))
      .when(lock('l', 'OperationTypeApply', raised))
      .events();
    expect(events.map((e) => e.type)).toEqual(['LockAcquired']);
  });

  it('reports a lock held by someone else before the quota', () => {
    const held = [
      ...committed(4),
      ...spec.eventsOf(committed(4), lock('other', 'OperationTypeApply')),
    ];
    spec
      .given(held)
      .when(lock('l-2', 'OperationTypeApply', QUOTA))
      .thenFails('STATE.LOCKED');
  });
});

describe('State decider: kl apply runs on a state over its hard limit', () => {
  const acquire = (mode: 'read' | 'write', quota?: QuotaLimit): StateCommand => ({
    type: 'AcquireReservations',
    data: {
      name: NAME,
      runId: 'run-1',
      reservationIds: ['r-1'],
      requests: [{ glob: 'terraform_data.web', mode }],
      leaseSeconds: 60,
      info: {},
      baseVersion: 1,
      writeSet: mode === 'write' ? ['terraform_data.web[0]'] : [],
      readSet: [],
      ...(quota ? { quota } : {}),
    },
    metadata: ctx,
  });

  it('refuses a run that writes, and lets one that only reads start', () => {
    spec.given(committed(4)).when(acquire('write', QUOTA)).thenFails('QUOTA.EXCEEDED');
    const events = spec.given(committed(4)).when(acquire('read', QUOTA)).events();
    expect(events.map((e) => e.type)).toEqual(['ReservationAcquired']);
    expect(spec.given(committed(3)).when(acquire('write', QUOTA)).events()).toHaveLength(1);
  });

  it('records the overrun of a row-level commit that goes over the limit', () => {
    const history = [...committed(3), ...spec.eventsOf(committed(3), acquire('write'))];
    const upsert = {
      address: 'terraform_data.web[3]',
      resource: {
        module: '',
        mode: 'managed' as const,
        type: 'terraform_data',
        name: 'web',
        provider: PROVIDER,
        each: 'list' as const,
      },
      instance: objects(4)[3],
    };
    const events = spec
      .given(history)
      .when({
        type: 'CommitDelta',
        data: {
          name: NAME,
          source: 'apply',
          runId: 'run-1',
          baseVersion: 1,
          checksum: 'delta-1',
          upserts: [upsert],
          deletes: [],
          outputs: { set: {}, remove: [] },
          release: true,
          quota: QUOTA,
        },
        metadata: ctx,
      })
      .events();
    expect(overruns(events)).toEqual([
      expect.objectContaining({ version: 2, level: 'hard', limit: 3, count: 4 }),
    ]);
  });
});
