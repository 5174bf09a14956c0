import { deciderSpec } from '../../../test/support/decider-spec';
import { randomGlob, rng } from '../../../test/support/random-globs';
import { DomainError } from '../shared/domain-error';
import { CommandContext } from '../shared/event';
import { buildDocument, documentMeta } from '../terraform/build-document';
import { InstanceObjectV4, StateDocumentV4 } from '../terraform/state-document';
import { flattenInstances, resourceDescriptor } from '../terraform/state-instances';
import { LockInfo } from './lock-info';
import {
  AcquireReservations,
  CommitDelta,
  CommitState,
  DeltaUpsert,
  StateCommand,
} from './state.commands';
import { readGlobsAhead } from './reserve';
import { decide, stateDecider } from './state.decider';
import { evolve } from './state.evolve';
import { ReservationAcquired, StateEvent } from './state.events';
import { ActiveState, initialState } from './state.model';
import { fromSnapshot, toSnapshot } from './state.snapshot';
import { fuzzSeeds, seedRange, withSeed } from '../../../test/support/seeded-random';

const NAME = 'prod';
const ID = 'state-id-1';
const PROVIDER = 'provider["registry.terraform.io/hashicorp/aws"]';
const T0 = '2026-11-30T10:00:00.000Z';
const at = (seconds: number) => new Date(Date.parse(T0) + seconds * 1000).toISOString();
const ctx = (actor = 'alice', seconds = 0): CommandContext => ({
  actor,
  correlationId: 'corr',
  now: at(seconds),
});

const { given, eventsOf } = deciderSpec(stateDecider);

/** Globs parsed, counted (the module as it is otherwise). */
const mockParsed = { count: 0 };
jest.mock('../reservations/address-glob', () => {
  const actual = jest.requireActual<typeof import('../reservations/address-glob')>(
    '../reservations/address-glob',
  );
  return {
    ...actual,
    parseAddressGlob: (text: string) => {
      mockParsed.count++;
      return actual.parseAddressGlob(text);
    },
  };
});

function instance(input: string, key?: number | string): InstanceObjectV4 {
  return {
    ...(key === undefined ? {} : { index_key: key }),
    schema_version: 0,
    attributes: { id: `id-${input}`, input },
    sensitive_attributes: [],
  };
}

/** module.web (aws_instance.a, two instances), module.db (aws_db.main), root aws_vpc.main. */
function trunk(serial: number): StateDocumentV4 {
  return {
    version: 4,
    terraform_version: '1.11.4',
    serial,
    lineage: 'lineage-1',
    outputs: { vpc: { value: 'vpc-1', type: 'string' } },
    resources: [
      {
        mode: 'managed',
        type: 'aws_vpc',
        name: 'main',
        provider: PROVIDER,
        instances: [instance('vpc')],
      },
      {
        module: 'module.db',
        mode: 'managed',
        type: 'aws_db',
        name: 'main',
        provider: PROVIDER,
        instances: [instance('db')],
      },
      {
        module: 'module.web',
        mode: 'managed',
        type: 'aws_instance',
        name: 'a',
        provider: PROVIDER,
        instances: [instance('w0', 0), instance('w1', 1)],
      },
    ],
    check_results: null,
  };
}

/** A whole-document write, with the instances the transport flattens. */
function commitState(
  data: Omit<CommitState['data'], 'instances'>,
  metadata: CommandContext,
): StateCommand {
  return {
    type: 'CommitState',
    data: { ...data, instances: flattenInstances(data.document) },
    metadata,
  };
}

const created: StateEvent = { type: 'StateCreated', data: { stateId: ID, name: NAME } };
const v1 = eventsOf(
  [created],
  commitState(
    { name: NAME, newStateId: ID, document: trunk(7), source: 'http', checksum: 'c1' },
    ctx('terraform'),
  ),
);

function info(id: string, operation = 'OperationTypeApply', who = 'bob@laptop'): LockInfo {
  return {
    ID: id,
    Operation: operation,
    Info: '',
    Who: who,
    Version: '1.11.4',
    Created: T0,
    Path: '',
  };
}
const lock = (id: string, operation?: string, seconds = 0): StateCommand => ({
  type: 'LockState',
  data: { name: NAME, newStateId: ID, lockInfo: info(id, operation) },
  metadata: ctx('bob', seconds),
});
const planLock = (id: string, seconds = 0) => lock(id, 'OperationTypePlan', seconds);

type Want = [glob: string, mode: 'read' | 'write'];

/** The DomainError a command is refused with, after these events. */
function refusal(history: (StateEvent | StateEvent[])[], command: StateCommand): DomainError {
  const state = history.flat().reduce(evolve, initialState());
  try {
    decide(command, state);
  } catch (err) {
    if (err instanceof DomainError) return err;
    throw err;
  }
  throw new Error(`${command.type} was not refused`);
}
function acquire(
  runId: string,
  wants: Want[],
  extra: Partial<AcquireReservations['data']> = {},
  c: CommandContext = ctx(),
): AcquireReservations {
  return {
    type: 'AcquireReservations',
    data: {
      name: NAME,
      runId,
      reservationIds: wants.map((_, i) => `${runId}-r${i}`),
      requests: wants.map(([glob, mode]) => ({ glob, mode })),
      leaseSeconds: 900,
      info: { plan: 'web' },
      baseVersion: 1,
      writeSet: [],
      readSet: [],
      ...extra,
    },
    metadata: c,
  };
}

/** A run's reservations as the decider writes them: the run's info on the first only. */
function acquired(runId: string, wants: Want[], actor = 'alice', seconds = 0, lease = 900) {
  return wants.map(([glob, mode], i): ReservationAcquired => ({
    type: 'ReservationAcquired',
    data: {
      stateId: ID,
      reservationId: `${runId}-r${i}`,
      runId,
      glob,
      mode,
      holder: actor,
      ...(i === 0 ? { info: { plan: 'web' } } : {}),
      acquiredAt: at(seconds),
      expiresAt: at(seconds + lease),
    },
  }));
}

/** The same, as written before wave 19: the run's info on every reservation. */
function acquiredWithInfoOnEach(runId: string, wants: Want[], actor = 'alice', seconds = 0) {
  return acquired(runId, wants, actor, seconds).map((e): ReservationAcquired => ({
    ...e,
    data: { ...e.data, info: { plan: 'web' } },
  }));
}

const webRun = acquired('run-web', [
  ['module.web.*', 'write'],
  ['aws_vpc.main', 'read'],
]);

function upsert(doc: StateDocumentV4, address: string, input: string): DeltaUpsert {
  const found = flattenInstances(doc).find((i) => i.address === address);
  if (found) {
    return {
      address,
      resource: found.resource,
      instance: { ...found.instance, attributes: { id: `id-${input}`, input } },
    };
  }
  throw new Error(`no ${address}`);
}

function delta(
  runId: string | undefined,
  change: Partial<CommitDelta['data']>,
  c: CommandContext = ctx(),
): CommitDelta {
  return {
    type: 'CommitDelta',
    data: {
      name: NAME,
      source: 'apply',
      ...(runId === undefined ? {} : { runId }),
      baseVersion: 1,
      checksum: `delta-${runId}`,
      terraformVersion: '1.11.4',
      upserts: [],
      deletes: [],
      outputs: { set: {}, remove: [] },
      release: true,
      ...change,
    },
    metadata: c,
  };
}

describe('State decider: locks as reservations', () => {
  it('grants any number of plan locks at once, as shared reads', () => {
    const first = eventsOf([created, v1], planLock('P1'));
    expect(first).toEqual([
      {
        type: 'LockAcquired',
        data: {
          stateId: ID,
          lockId: 'P1',
          info: info('P1', 'OperationTypePlan'),
          mode: 'read',
          acquiredAt: T0,
        },
      },
    ]);
    const second = eventsOf([created, v1, first], planLock('P2'));
    expect(second).toMatchObject([{ type: 'LockAcquired', data: { lockId: 'P2', mode: 'read' } }]);
    const third = eventsOf([created, v1, first, second], planLock('P3'));
    expect(third).toHaveLength(1);
  });

  it('makes a writer wait for plans, and plans wait for a writer, naming the holder', () => {
    const plans = eventsOf([created, v1], planLock('P1'));
    given(created, v1, plans)
      .when(lock('W1'))
      .thenFails('STATE.LOCKED', { holder: info('P1', 'OperationTypePlan') });
    const write = eventsOf([created, v1], lock('W1'));
    given(created, v1, write)
      .when(planLock('P1'))
      .thenFails('STATE.LOCKED', { holder: info('W1') });
  });

  it('grants a retry of a held plan lock (the same LockInfo) without new events', () => {
    const plans = eventsOf([created, v1], planLock('P1'));
    given(created, v1, plans).when(planLock('P1')).then([]);
  });

  it('refuses a LOCK while an apply run holds a reservation, with a LockInfo naming the run', () => {
    given(created, v1, webRun)
      .when(lock('W1'))
      .thenFails('STATE.LOCKED', {
        holder: {
          ID: 'run-web',
          Operation: 'kl apply',
          Who: 'alice',
          Info: expect.stringContaining('write module.web.*, read aws_vpc.main'),
          Version: '',
          Created: T0,
          Path: '',
        },
      });
  });

  it('names a run holding thousands of globs in a LockInfo of a few lines', () => {
    const wants = Array.from({ length: 3000 }, (_, i): Want => [`aws_instance.n${i}`, 'write']);
    const big = acquired('run-big', wants);
    const holder = refusal([created, v1, big], lock('W1')).metadata.holder as LockInfo;
    expect(holder.ID).toBe('run-big');
    expect(holder.Info).toContain('write aws_instance.n0, write aws_instance.n1');
    expect(holder.Info).toContain('and 2995 more');
    expect(String(holder.Info).length).toBeLessThan(500);
  });

  it('lets a plan read beside a run that only reads, not beside one that writes', () => {
    const reader = acquired('run-r', [['aws_vpc.main', 'read']]);
    expect(eventsOf([created, v1, reader], planLock('P1'))).toHaveLength(1);
    given(created, v1, webRun).when(planLock('P1')).thenFails('STATE.LOCKED');
  });

  it('reclaims a run whose lease ran out, then locks', () => {
    const events = eventsOf([created, v1, webRun], lock('W1', undefined, 901));
    expect(events).toEqual([
      {
        type: 'ReservationExpired',
        data: {
          stateId: ID,
          runId: 'run-web',
          reservationIds: ['run-web-r0', 'run-web-r1'],
          expiresAt: at(900),
          reclaimedBy: 'W1',
        },
      },
      expect.objectContaining({ type: 'LockAcquired' }),
    ]);
  });

  it('releases one plan lock by its ID and leaves the others', () => {
    const p1 = eventsOf([created, v1], planLock('P1'));
    const p2 = eventsOf([created, v1, p1], planLock('P2'));
    given(created, v1, p1, p2)
      .when({ type: 'UnlockState', data: { name: NAME, lockId: 'P1' }, metadata: ctx() })
      .then([{ type: 'LockReleased', data: { stateId: ID, lockId: 'P1', forced: false } }]);
    // A retried UNLOCK of a plan lock already gone changes nothing and is no error.
    given(created, v1, p2)
      .when({ type: 'UnlockState', data: { name: NAME, lockId: 'P1' }, metadata: ctx() })
      .then([]);
  });

  it('force-unlocks every terraform lock without an ID, only the named one with it', () => {
    const p1 = eventsOf([created, v1], planLock('P1'));
    const p2 = eventsOf([created, v1, p1], planLock('P2'));
    given(created, v1, p1, p2)
      .when({ type: 'ForceUnlockState', data: { name: NAME }, metadata: ctx() })
      .then([
        { type: 'LockReleased', data: { stateId: ID, lockId: 'P1', forced: true } },
        { type: 'LockReleased', data: { stateId: ID, lockId: 'P2', forced: true } },
      ]);
    given(created, v1, p1, p2)
      .when({ type: 'ForceUnlockState', data: { name: NAME, lockId: 'P2' }, metadata: ctx() })
      .then([{ type: 'LockReleased', data: { stateId: ID, lockId: 'P2', forced: true } }]);
    // Apply runs are not terraform's to release.
    given(created, v1, webRun)
      .when({ type: 'ForceUnlockState', data: { name: NAME }, metadata: ctx() })
      .then([]);
  });

  it('reads a lock from before plans shared as a write lock', () => {
    const old: StateEvent = {
      type: 'LockAcquired',
      data: { stateId: ID, lockId: 'OLD', info: info('OLD', 'OperationTypePlan') },
    };
    given(created, v1, old)
      .when(planLock('P1'))
      .thenFails('STATE.LOCKED', { holder: info('OLD', 'OperationTypePlan') });
  });

  describe('whole-document writes and deletes', () => {
    const post = (lockId?: string, seconds = 0): StateCommand =>
      commitState(
        {
          name: NAME,
          newStateId: ID,
          document: trunk(8),
          source: 'http',
          checksum: `c8-${lockId}`,
          ...(lockId === undefined ? {} : { lockId }),
        },
        ctx('terraform', seconds),
      );

    it('refuses a POST while a run holds anything, naming the run', () => {
      given(created, v1, webRun)
        .when(post())
        .thenFails('STATE.LOCKED', { holder: expect.objectContaining({ ID: 'run-web' }) });
      const reader = acquired('run-r', [['aws_vpc.main', 'read']]);
      given(created, v1, reader).when(post()).thenFails('STATE.LOCKED');
    });

    it('refuses a POST under one plan lock while other plans read', () => {
      const p1 = eventsOf([created, v1], planLock('P1'));
      const p2 = eventsOf([created, v1, p1], planLock('P2'));
      given(created, v1, p1, p2)
        .when(post('P1'))
        .thenFails('STATE.LOCKED', { holder: info('P2', 'OperationTypePlan') });
    });

    it('reclaims an expired run before writing', () => {
      const events = eventsOf([created, v1, webRun], post(undefined, 1000));
      expect(events.map((e) => e.type)).toEqual(['ReservationExpired', 'ApplyCommitted']);
    });

    it('refuses a DELETE while a run is live', () => {
      given(created, v1, webRun)
        .when({ type: 'DeleteState', data: { name: NAME }, metadata: ctx() })
        .thenFails('STATE.LOCKED');
    });
  });
});

describe('State decider: AcquireReservations', () => {
  it('grants every glob, in its one spelling, with the lease from the command time', () => {
    given(created, v1)
      .when(
        acquire('run-web', [
          ['module.web', 'write'],
          ['aws_vpc.main', 'read'],
        ]),
      )
      .then(webRun);
  });

  it('refuses a missing state and a state without a version', () => {
    given()
      .when(acquire('r', [['*', 'write']]))
      .thenFails('STATE.NOT_FOUND');
    const lockedOnly = eventsOf([], lock('L1'));
    given(lockedOnly)
      .when(acquire('r', [['*', 'write']]))
      .thenFails('APPLY.NO_VERSION');
  });

  it('grants disjoint writes and shared reads beside a run', () => {
    expect(
      eventsOf([created, v1, webRun], acquire('run-db', [['module.db.*', 'write']])),
    ).toHaveLength(1);
    expect(
      eventsOf([created, v1, webRun], acquire('run-r', [['aws_vpc.main', 'read']])),
    ).toHaveLength(1);
    // module.web.* does not cover module.web2.
    expect(
      eventsOf([created, v1, webRun], acquire('run-w2', [['module.web2.*', 'write']])),
    ).toHaveLength(1);
  });

  it('refuses all of it when one glob conflicts, naming every conflicting holder', () => {
    const dbRun = acquired('run-db', [['module.db.*', 'write']], 'bob', 10);
    given(created, v1, webRun, dbRun)
      .when(
        acquire('run-3', [
          ['module.web.aws_instance.a[1]', 'write'],
          ['module.db.aws_db.main', 'read'],
          ['module.cache.*', 'write'],
        ]),
      )
      .thenFails('RESERVATION.CONFLICT', {
        holders: [
          expect.objectContaining({
            kind: 'apply',
            glob: 'module.web.*',
            mode: 'write',
            actor: 'alice',
            runId: 'run-web',
            acquiredAt: T0,
            expiresAt: at(900),
          }),
          expect.objectContaining({
            kind: 'apply',
            glob: 'module.db.*',
            actor: 'bob',
            runId: 'run-db',
            acquiredAt: at(10),
          }),
        ],
      });
  });

  it('refuses a write over a read, and a read over a write', () => {
    given(created, v1, webRun)
      .when(acquire('run-2', [['aws_vpc.main', 'write']]))
      .thenFails('RESERVATION.CONFLICT');
    given(created, v1, webRun)
      .when(acquire('run-2', [['module.web.aws_instance.a', 'read']]))
      .thenFails('RESERVATION.CONFLICT');
  });

  it('waits for terraform: a write lock blocks everything, plan locks block writes', () => {
    const w = eventsOf([created, v1], lock('W1'));
    given(created, v1, w)
      .when(acquire('r', [['aws_vpc.main', 'read']]))
      .thenFails('RESERVATION.CONFLICT', {
        holders: [
          expect.objectContaining({
            kind: 'terraform-lock',
            glob: '*',
            mode: 'write',
            actor: 'bob@laptop',
            runId: null,
            lockId: 'W1',
            lockInfo: info('W1'),
          }),
        ],
      });
    const p = eventsOf([created, v1], planLock('P1'));
    given(created, v1, p)
      .when(acquire('r', [['module.web.*', 'write']]))
      .thenFails('RESERVATION.CONFLICT', {
        holders: [expect.objectContaining({ kind: 'terraform-plan', mode: 'read', lockId: 'P1' })],
      });
    expect(eventsOf([created, v1, p], acquire('r', [['aws_vpc.main', 'read']]))).toHaveLength(1);
  });

  it('reclaims a conflicting run whose lease ran out, and records it', () => {
    const later = ctx('carol', 900);
    const events = eventsOf(
      [created, v1, webRun],
      acquire('run-2', [['module.web.*', 'write']], {}, later),
    );
    expect(events[0]).toEqual({
      type: 'ReservationExpired',
      data: {
        stateId: ID,
        runId: 'run-web',
        reservationIds: ['run-web-r0', 'run-web-r1'],
        expiresAt: at(900),
        reclaimedBy: 'run-2',
      },
    });
    expect(events[1]).toMatchObject({
      type: 'ReservationAcquired',
      data: { runId: 'run-2', holder: 'carol' },
    });
    // A run that expired but is in nobody's way stays until someone needs it.
    expect(
      eventsOf([created, v1, webRun], acquire('run-3', [['module.db.*', 'write']], {}, later)).map(
        (e) => e.type,
      ),
    ).toEqual(['ReservationAcquired']);
  });

  it('takes a retry of the same acquire as done, and refuses other reservations for the run', () => {
    given(created, v1, webRun)
      .when(
        acquire('run-web', [
          ['module.web.*', 'write'],
          ['aws_vpc.main', 'read'],
        ]),
      )
      .then([]);
    given(created, v1, webRun)
      .when(acquire('run-web', [['module.db.*', 'write']]))
      .thenFails('APPLY.ALREADY_STARTED');
  });

  describe('stale plans', () => {
    const v2 = eventsOf(
      [created, v1],
      commitState(
        {
          name: NAME,
          newStateId: ID,
          document: {
            ...trunk(8),
            resources: trunk(8).resources.map((r) =>
              r.name === 'main' && r.type === 'aws_vpc'
                ? { ...r, instances: [instance('vpc2')] }
                : r,
            ),
          },
          source: 'http',
          checksum: 'c2',
        },
        ctx('terraform'),
      ),
    );

    it('refuses a plan whose read or write set changed after its base version', () => {
      given(created, v1, v2)
        .when(
          acquire('r', [['module.web.*', 'write']], {
            writeSet: ['module.web.aws_instance.a[0]'],
            readSet: ['aws_vpc.main'],
          }),
        )
        .thenFails('APPLY.STALE', {
          addresses: [{ address: 'aws_vpc.main', changedInVersion: 2 }],
        });
      // Globs in the sets cover too.
      given(created, v1, v2)
        .when(acquire('r', [['*', 'write']], { writeSet: ['aws_vpc.main[0]'], readSet: ['*'] }))
        .thenFails('APPLY.STALE');
    });

    it('takes a plan based on the current version, or whose addresses did not change', () => {
      expect(
        eventsOf(
          [created, v1, v2],
          acquire('r', [['module.web.*', 'write']], {
            writeSet: ['module.web.aws_instance.a[0]'],
            readSet: ['module.db.aws_db.main'],
          }),
        ),
      ).toHaveLength(1);
      expect(
        eventsOf(
          [created, v1, v2],
          acquire('r', [['aws_vpc.main', 'write']], {
            baseVersion: 2,
            writeSet: ['aws_vpc.main'],
          }),
        ),
      ).toHaveLength(1);
    });

    it('counts a removed address as changed', () => {
      const removed = eventsOf(
        [created, v1],
        commitState(
          {
            name: NAME,
            newStateId: ID,
            document: { ...trunk(8), resources: trunk(8).resources.slice(0, 2) },
            source: 'http',
            checksum: 'c3',
          },
          ctx('terraform'),
        ),
      );
      given(created, v1, removed)
        .when(acquire('r', [['module.web.*', 'write']], { readSet: ['module.web.*'] }))
        .thenFails('APPLY.STALE', {
          addresses: [
            { address: 'module.web.aws_instance.a[0]', changedInVersion: 2 },
            { address: 'module.web.aws_instance.a[1]', changedInVersion: 2 },
          ],
        });
    });
  });

  it('refuses what cannot be a reservation', () => {
    given(created, v1)
      .when(acquire('r', [['module.a["x.*"].b', 'write']]))
      .thenFails('RESERVATION.GLOB_INVALID');
    given(created, v1).when(acquire('r', [])).thenFails('APPLY.INVALID');
    given(created, v1)
      .when(acquire('r', [['*', 'write']], { leaseSeconds: 0 }))
      .thenFails('APPLY.INVALID');
    given(created, v1)
      .when(acquire('r', [['*', 'write']], { baseVersion: 2 }))
      .thenFails('APPLY.INVALID');
    given(created, v1)
      .when(acquire('r', [['*', 'write']], { readSet: ['nope'] }))
      .thenFails('RESERVATION.GLOB_INVALID');
  });

  it('answers a conflict with a run of thousands of globs with every holder, in a short message', () => {
    const wants = Array.from({ length: 3000 }, (_, i): Want => [`aws_instance.n${i}`, 'write']);
    const error = refusal(
      [created, v1, acquired('run-big', wants)],
      acquire('run-all', [['*', 'write']]),
    );
    expect(error.code).toBe('RESERVATION.CONFLICT');
    expect(error.metadata.holders).toHaveLength(3000);
    expect(error.message).toContain('and 2995 more');
    expect(error.message.length).toBeLessThan(1000);
  });
});

describe('State decider: RenewReservations and ReleaseReservations', () => {
  const renew = (runId: string, seconds: number): StateCommand => ({
    type: 'RenewReservations',
    data: { name: NAME, runId, leaseSeconds: 600 },
    metadata: ctx('alice', seconds),
  });

  it('extends every reservation of the run from the command time', () => {
    given(created, v1, webRun)
      .when(renew('run-web', 60))
      .then([
        {
          type: 'ReservationRenewed',
          data: {
            stateId: ID,
            runId: 'run-web',
            reservationIds: ['run-web-r0', 'run-web-r1'],
            expiresAt: at(660),
          },
        },
      ]);
  });

  it('renews a lease that ran out when nobody reclaimed it', () => {
    expect(eventsOf([created, v1, webRun], renew('run-web', 2000))).toHaveLength(1);
  });

  it('refuses a heartbeat once the run was reclaimed: it must not commit', () => {
    const reclaimed = eventsOf(
      [created, v1, webRun],
      acquire('run-2', [['module.web.*', 'write']], {}, ctx('bob', 901)),
    );
    given(created, v1, webRun, reclaimed)
      .when(renew('run-web', 902))
      .thenFails('RESERVATION.EXPIRED', { runId: 'run-web' });
  });

  it('releases the run once; releasing again changes nothing', () => {
    const release: StateCommand = {
      type: 'ReleaseReservations',
      data: { name: NAME, runId: 'run-web', reason: 'aborted' },
      metadata: ctx(),
    };
    const released = eventsOf([created, v1, webRun], release);
    expect(released).toEqual([
      {
        type: 'ReservationReleased',
        data: {
          stateId: ID,
          runId: 'run-web',
          reservationIds: ['run-web-r0', 'run-web-r1'],
          reason: 'aborted',
        },
      },
    ]);
    given(created, v1, webRun, released).when(release).then([]);
    // Once released, the addresses are free.
    expect(eventsOf([created, v1, webRun, released], lock('W1'))).toHaveLength(1);
  });
});

describe('State decider: CommitDelta', () => {
  const doc = trunk(7);
  const w0 = 'module.web.aws_instance.a[0]';
  const w1 = 'module.web.aws_instance.a[1]';

  it('commits only the touched instances as one new version on the current trunk', () => {
    const events = eventsOf(
      [created, v1, webRun],
      delta('run-web', {
        upserts: [
          upsert(doc, w0, 'w0-new'),
          // unchanged: no lifecycle event
          { ...upsert(doc, w1, 'w1'), instance: instance('w1', 1) },
          {
            address: 'module.web.aws_instance.a[2]',
            resource: upsert(doc, w0, 'x').resource,
            instance: instance('w2', 2),
          },
        ],
        outputs: {
          set: { web: { value: ['a', 'b'], type: ['list', 'string'], sensitive: false } },
          remove: [],
        },
      }),
    );
    const w0Hash = flattenInstances(doc).find((i) => i.address === w0)!.hash;
    expect(events.map((e) => [e.type, 'address' in e.data ? e.data.address : null])).toEqual([
      ['ApplyCommitted', null],
      ['LifecycleClosed', w0],
      ['LifecycleOpened', w0],
      ['LifecycleOpened', 'module.web.aws_instance.a[2]'],
      ['ReservationReleased', null],
    ]);
    expect(events[0]).toEqual({
      type: 'ApplyCommitted',
      data: {
        stateId: ID,
        version: 2,
        serial: 8,
        lineage: 'lineage-1',
        source: 'apply',
        runId: 'run-web',
        terraformVersion: '1.11.4',
        // sorted by name, as terraform writes them; sensitive: false omitted
        outputs: {
          vpc: { value: 'vpc-1', type: 'string' },
          web: { value: ['a', 'b'], type: ['list', 'string'] },
        },
        // the new output opens; the untouched one stays open
        outputChanges: { closed: [], opened: ['web'] },
        checkResults: null,
        extra: {},
        checksum: 'delta-run-web',
        instanceCount: 5,
        resourceCount: 3,
      },
    });
    expect(events[1]).toMatchObject({ data: { version: 2, serial: 8, hash: w0Hash } });
    expect(events[4]).toEqual({
      type: 'ReservationReleased',
      data: {
        stateId: ID,
        runId: 'run-web',
        reservationIds: ['run-web-r0', 'run-web-r1'],
        reason: 'committed',
      },
    });
  });

  it('lands two disjoint runs one after the other, each on the trunk the other left', () => {
    const dbRun = acquired('run-db', [['module.db.*', 'write']], 'bob');
    const web = eventsOf(
      [created, v1, webRun, dbRun],
      delta('run-web', { upserts: [upsert(doc, w0, 'web')] }),
    );
    const db = eventsOf(
      [created, v1, webRun, dbRun, web],
      delta('run-db', { upserts: [upsert(doc, 'module.db.aws_db.main', 'db2')], checksum: 'd2' }),
    );
    expect(db[0]).toMatchObject({
      type: 'ApplyCommitted',
      data: { version: 3, serial: 9, runId: 'run-db' },
    });
    const state = [created, v1, webRun, dbRun, web, db]
      .flat()
      .reduce(evolve, initialState()) as ActiveState;
    expect(state.reservations.size).toBe(0);
    expect(state.changedIn.get(w0)).toBe(2);
    expect(state.changedIn.get('module.db.aws_db.main')).toBe(3);
    expect(state.changedIn.get('aws_vpc.main')).toBe(1);
  });

  it('the committed instances and outputs build the document terraform would write', () => {
    const history = [created, v1, webRun];
    const events = eventsOf(
      history,
      delta('run-web', {
        upserts: [upsert(doc, w1, 'w1-new')],
        deletes: [w0],
        outputs: { set: { z: { value: 1, type: 'number', sensitive: true } }, remove: ['vpc'] },
      }),
    );
    const [applied] = events;
    if (applied.type !== 'ApplyCommitted') throw new Error('no commit');
    const instances = new Map(flattenInstances(doc).map((i) => [i.address, i]));
    for (const e of events) {
      if (e.type === 'LifecycleClosed') instances.delete(e.data.address);
      if (e.type === 'LifecycleOpened') instances.set(e.data.address, { ...e.data });
    }
    const built = buildDocument(
      {
        ...documentMeta(doc),
        ...applied.data,
        serial: applied.data.serial,
        lineage: applied.data.lineage,
      },
      instances.values(),
    );
    const expected: StateDocumentV4 = {
      ...doc,
      serial: 8,
      outputs: { z: { value: 1, type: 'number', sensitive: true } },
      resources: [
        doc.resources[0],
        doc.resources[1],
        {
          ...doc.resources[2],
          instances: [
            { ...instance('w1-new', 1), attributes: { id: 'id-w1-new', input: 'w1-new' } },
          ],
        },
      ],
    };
    expect(built).toEqual(expected);
    expect(applied.data).toMatchObject({ instanceCount: 3, resourceCount: 3 });
  });

  it('counts a resource whose last instance is removed out, and a new one in', () => {
    const dbRun = acquired('run-db', [
      ['module.db.*', 'write'],
      ['module.cache.*', 'write'],
    ]);
    const [applied] = eventsOf(
      [created, v1, dbRun],
      delta('run-db', {
        deletes: ['module.db.aws_db.main'],
        upserts: [
          {
            address: 'module.cache.aws_cache.c',
            resource: {
              ...resourceDescriptor(doc.resources[1]),
              module: 'module.cache',
              type: 'aws_cache',
              name: 'c',
            },
            instance: instance('c'),
          },
        ],
      }),
    );
    expect(applied).toMatchObject({ data: { instanceCount: 4, resourceCount: 3 } });
  });

  it("refuses a write outside the run's write reservations, and commits nothing", () => {
    given(created, v1, webRun)
      .when(delta('run-web', { upserts: [upsert(doc, 'module.db.aws_db.main', 'x')] }))
      .thenFails('RESERVATION.NOT_HELD', { addresses: ['module.db.aws_db.main'] });
    // A read reservation does not let a run write.
    given(created, v1, webRun)
      .when(delta('run-web', { upserts: [upsert(doc, 'aws_vpc.main', 'x')] }))
      .thenFails('RESERVATION.NOT_HELD', { addresses: ['aws_vpc.main'] });
    given(created, v1, webRun)
      .when(delta('run-none', { upserts: [upsert(doc, w0, 'x')] }))
      .thenFails('RESERVATION.NOT_HELD');
  });

  it('counts a deposed object as its instance', () => {
    const deposed = upsert(doc, w0, 'old');
    const events = eventsOf(
      [created, v1, webRun],
      delta('run-web', {
        upserts: [
          {
            address: `${w0} (deposed object 00000001)`,
            resource: deposed.resource,
            instance: { ...deposed.instance, deposed: '00000001' },
          },
        ],
      }),
    );
    expect(events[0]).toMatchObject({ data: { instanceCount: 5, resourceCount: 3 } });
  });

  it('refuses a run whose reservations were reclaimed after its lease ran out', () => {
    const reclaimed = eventsOf(
      [created, v1, webRun],
      acquire('run-2', [['aws_vpc.main', 'write']], {}, ctx('bob', 901)),
    );
    given(created, v1, webRun, reclaimed)
      .when(delta('run-web', { upserts: [upsert(doc, w0, 'x')] }))
      .thenFails('RESERVATION.NOT_HELD');
  });

  it('refuses a touched address that changed after the base version', () => {
    const all = acquired('run-all', [['*', 'write']]);
    const first = eventsOf(
      [created, v1, all],
      delta('run-all', { upserts: [upsert(doc, w0, 'a')], release: false }),
    );
    given(created, v1, all, first)
      .when(delta('run-all', { upserts: [upsert(doc, w0, 'b')], checksum: 'again' }))
      .thenFails('APPLY.STALE', { addresses: [{ address: w0, changedInVersion: 2 }] });
    // Another address that changed since is no reason to refuse.
    expect(
      eventsOf(
        [created, v1, all, first],
        delta('run-all', { upserts: [upsert(doc, w1, 'b')], checksum: 'again' }),
      )[0],
    ).toMatchObject({ data: { version: 3 } });
  });

  it("takes a retry of the run's own commit as done", () => {
    const committed = eventsOf(
      [created, v1, webRun],
      delta('run-web', { upserts: [upsert(doc, w0, 'a')] }),
    );
    given(created, v1, webRun, committed)
      .when(delta('run-web', { upserts: [upsert(doc, w0, 'a')] }))
      .then([]);
  });

  it('refuses while a terraform lock is held, and a lockless delta where a run reserved', () => {
    const w = eventsOf([created, v1], lock('W1'));
    given(created, v1, w)
      .when(delta(undefined, { source: 'state-engine', upserts: [upsert(doc, w0, 'x')] }))
      .thenFails('RESERVATION.CONFLICT', {
        holders: [expect.objectContaining({ kind: 'terraform-lock', lockId: 'W1' })],
      });
    given(created, v1, webRun)
      .when(delta(undefined, { source: 'state-engine', upserts: [upsert(doc, w0, 'x')] }))
      .thenFails('RESERVATION.CONFLICT', {
        holders: [expect.objectContaining({ runId: 'run-web' })],
      });
    // Under its own terraform lock, or where nobody holds anything, a lane may write.
    expect(
      eventsOf(
        [created, v1, w],
        delta(undefined, { source: 'state-engine', lockId: 'W1', upserts: [upsert(doc, w0, 'x')] }),
      )[0],
    ).toMatchObject({ type: 'ApplyCommitted', data: { source: 'state-engine' } });
    expect(
      eventsOf([created, v1], delta(undefined, { source: 'state-engine', deletes: [w0] })).map(
        (e) => e.type,
      ),
    ).toEqual(['ApplyCommitted', 'LifecycleClosed']);
  });

  it('refuses a change that does not hold together', () => {
    const g = given(created, v1, acquired('run-all', [['*', 'write']]));
    const wrongAddress = { ...upsert(doc, w0, 'x'), address: w1 };
    g.when(delta('run-all', { upserts: [wrongAddress] })).thenFails('APPLY.INVALID');
    g.when(delta('run-all', { upserts: [upsert(doc, w0, 'x'), upsert(doc, w0, 'y')] })).thenFails(
      'APPLY.INVALID',
    );
    g.when(delta('run-all', { upserts: [upsert(doc, w0, 'x')], deletes: [w0] })).thenFails(
      'APPLY.INVALID',
    );
    g.when(delta('run-all', { deletes: ['not an address'] })).thenFails('APPLY.INVALID');
    g.when(
      delta('run-all', { outputs: { set: { vpc: { value: 1 } }, remove: ['vpc'] } }),
    ).thenFails('APPLY.INVALID');
    g.when(delta('run-all', { baseVersion: 5 })).thenFails('APPLY.INVALID');
    // A new provider for one instance of a resource whose other instance stays.
    const moved = upsert(doc, w0, 'x');
    g.when(
      delta('run-all', {
        upserts: [{ ...moved, resource: { ...moved.resource, provider: 'provider["other"]' } }],
      }),
    ).thenFails('APPLY.INVALID');
    // Carrying every instance of it, the resource may move.
    const both = [upsert(doc, w0, 'x'), upsert(doc, w1, 'y')].map((u) => ({
      ...u,
      resource: { ...u.resource, provider: 'provider["other"]' },
    }));
    expect(g.when(delta('run-all', { upserts: both })).events()[0]).toMatchObject({
      data: { resourceCount: 3 },
    });
  });

  it('keeps every decision across a snapshot', () => {
    const history = [
      created,
      v1,
      webRun,
      acquired('run-db', [['module.db.*', 'write']], 'bob', 5),
      eventsOf([created, v1], planLock('P1')),
    ];
    const state = history.flat().reduce(evolve, initialState());
    const restored = fromSnapshot(JSON.parse(JSON.stringify(toSnapshot(state))));
    expect(restored).toEqual(state);
    const commands: StateCommand[] = [
      delta('run-web', { upserts: [upsert(doc, w0, 'x')] }),
      acquire('run-3', [['module.db.*', 'read']]),
      lock('W9'),
      planLock('P2'),
      {
        type: 'RenewReservations',
        data: { name: NAME, runId: 'run-db', leaseSeconds: 60 },
        metadata: ctx(),
      },
    ];
    for (const c of commands) {
      const run = (s: typeof state) => {
        try {
          return decide(c, s);
        } catch (e) {
          return (e as Error).message;
        }
      };
      expect(run(restored)).toEqual(run(state));
    }
  });
});

describe("State decider: a run's info, once", () => {
  const many = (n: number): Want[] =>
    Array.from({ length: n }, (_, i): Want => [`module.web.aws_instance.a[${i}]`, 'write']);
  const preview = many(200).map(([glob]) => `- ${glob}`);
  const release = (runId: string): StateCommand => ({
    type: 'ReleaseReservations',
    data: { name: NAME, runId, reason: 'committed' },
    metadata: ctx(),
  });
  const fold = (...history: (StateEvent | StateEvent[])[]) =>
    history.flat().reduce(evolve, initialState()) as ActiveState;

  it('records the info of a run of 200 globs on its first reservation only, held once', () => {
    const info = { state_engine_operation: 'state rm', preview };
    const events = eventsOf([created, v1], acquire('run-rm', many(200), { info }));
    expect(events).toHaveLength(200);
    expect(events.filter((e) => 'info' in e.data).map((e) => e.data)).toEqual([
      expect.objectContaining({ reservationId: 'run-rm-r0', info }),
    ]);
    const state = fold(created, v1, events);
    expect(state.runInfo).toEqual(new Map([['run-rm', info]]));
    const infos = new Set([...state.reservations.values()].map((r) => r.info));
    expect([...infos]).toEqual([info]);
    expect(infos.size).toBe(1); // one object, shared by the 200 reservations
    // What reads a run's info finds it on any of its reservations: terraform is
    // told which state-engine operation holds the state.
    given(created, v1, events)
      .when(lock('W1'))
      .thenFails('STATE.LOCKED', {
        holder: expect.objectContaining({ ID: 'run-rm', Operation: 'state-engine: state rm' }),
      });
  });

  it('evolves reservations written with the info on each to the same state, info held once', () => {
    const db = (f: typeof acquired) => f('run-db', [['module.db.*', 'write']], 'bob', 5);
    const web: Want[] = [
      ['module.web.*', 'write'],
      ['aws_vpc.main', 'read'],
    ];
    const before = fold(
      created,
      v1,
      acquiredWithInfoOnEach('run-web', web),
      db(acquiredWithInfoOnEach),
    );
    const now = fold(created, v1, acquired('run-web', web), db(acquired));
    expect(before).toEqual(now);
    const [r0, r1] = [...before.reservations.values()];
    expect(r1.info).toBe(r0.info);
    expect(before.runInfo).toEqual(
      new Map([
        ['run-web', { plan: 'web' }],
        ['run-db', { plan: 'web' }],
      ]),
    );
    // Both decide alike, and a released run leaves no info behind.
    const released = eventsOf([created, v1, acquired('run-web', web)], release('run-web'));
    expect(
      eventsOf([created, v1, acquiredWithInfoOnEach('run-web', web)], release('run-web')),
    ).toEqual(released);
    expect(fold(created, v1, acquiredWithInfoOnEach('run-web', web), released).runInfo.size).toBe(
      0,
    );
    expect(fold(created, v1, acquired('run-web', web), released).runInfo.size).toBe(0);
  });

  it('snapshots the info once per run, and loads a snapshot with the info on each reservation', () => {
    const info = { state_engine_operation: 'state rm', preview };
    const state = fold(
      created,
      v1,
      eventsOf([created, v1], acquire('run-rm', many(200), { info })),
    );
    const text = JSON.stringify(toSnapshot(state));
    expect(text.split('- module.web.aws_instance.a[199]').length - 1).toBe(1);
    const restored = fromSnapshot(JSON.parse(text)) as ActiveState;
    expect(restored).toEqual(state);
    const shared = [...restored.reservations.values()].map((r) => r.info);
    expect(shared.every((i) => i === shared[0])).toBe(true);

    // Written before runInfo: each reservation with its own copy of the info.
    const older = JSON.parse(text) as { reservations: object[]; runInfo?: unknown };
    older.reservations = older.reservations.map((r) => ({ ...r, info }));
    delete older.runInfo;
    const loaded = fromSnapshot(JSON.parse(JSON.stringify(older))) as ActiveState;
    expect(loaded).toEqual(state);
    const infos = [...loaded.reservations.values()].map((r) => r.info);
    expect(infos.every((i) => i === infos[0])).toBe(true);
  });
});

describe('State decider: globs read ahead of AcquireReservations', () => {
  /** What deciding answers: the events, or the refusal's code and message. */
  function outcome(history: Parameters<typeof eventsOf>[0], command: AcquireReservations) {
    try {
      return { events: eventsOf(history, command) };
    } catch (err) {
      if (!(err instanceof DomainError)) throw err;
      return { code: err.code, message: err.message };
    }
  }

  it('decides what it decides without them, however much was read', () => {
    const held = acquired('run-held', [
      ['module.a.*', 'write'],
      ['aws_x.m[1]', 'read'],
    ]);
    let refused = 0;
    const seeds = fuzzSeeds(seedRange(1, 200));
    for (const seed of seeds) {
      withSeed(seed, () => {
        const r = rng(seed);
        const wants: Want[] = Array.from({ length: 1 + Math.floor(r() * 10) }, () => [
          // Some texts are not globs; some are in another spelling, some asked twice.
          r() < 0.05 ? 'module.' : r() < 0.1 ? 'module.a.*' : randomGlob(r),
          r() < 0.5 ? 'read' : 'write',
        ]);
        const history = [created, v1, ...(r() < 0.5 ? held : [])];
        const command = () =>
          acquire('run-new', wants, { writeSet: wants.map(([g]) => g), leaseSeconds: 600 });
        const expected = outcome(history, command());
        const ahead = command();
        const upTo = Math.floor(r() * (wants.length + 1));
        readGlobsAhead(ahead.data.requests, 0, upTo);
        expect({ seed, ...outcome(history, ahead) }).toEqual({ seed, ...expected });
        if ('code' in expected) refused++;
      });
    }
    expect(refused).toBeGreaterThan(seeds.length / 10);
  });

  it('reads no glob in the decision when all were read ahead', () => {
    const wants: Want[] = Array.from({ length: 20 }, (_, i) => [
      `module.m${i}.aws_x.a[0]`,
      'write',
    ]);
    const command = acquire('run-new', wants);
    expect(readGlobsAhead(command.data.requests, 0, 20)).toBe(true);
    const parsed = mockParsed.count;
    expect(eventsOf([created, v1], command)).toEqual(acquired('run-new', wants));
    expect(mockParsed.count - parsed).toBe(0);
  });

  it('stops at a text that is not a glob, which the decision then refuses in its order', () => {
    const command = acquire('run-new', [
      ['aws_x.m', 'write'],
      ['not a glob', 'write'],
    ]);
    expect(readGlobsAhead(command.data.requests, 0, 2)).toBe(false);
    given(created, v1).when(command).thenFails('RESERVATION.GLOB_INVALID');
    // The state's own refusals come first, as without reading ahead.
    given().when(command).thenFails('STATE.NOT_FOUND');
  });
});
