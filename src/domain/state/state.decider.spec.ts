import { createHash } from 'node:crypto';
import { CommandContext } from '../shared/event';
import { fixtureText } from '../terraform/__fixtures__/fixtures';
import { parseStateDocument } from '../terraform/parse-state-document';
import { InstanceObjectV4, StateDocumentV4 } from '../terraform/state-document';
import { flattenInstances } from '../terraform/state-instances';
import { LockInfo } from './lock-info';
import { CommitState, StateCommand } from './state.commands';
import { deciderSpec } from '../../../test/support/decider-spec';
import { decide, evolve, initialState, stateDecider } from './state.decider';
import { StateEvent, StateEventType } from './state.events';
import { StateAggregate } from './state.model';
import { fromSnapshot, toSnapshot } from './state.snapshot';

const ctx: CommandContext = {
  actor: 'alice',
  correlationId: 'corr-1',
  now: '2026-11-30T00:00:00.000Z',
};
const NAME = 'prod';
const ID = 'state-id-1';
const PROVIDER = 'provider["terraform.io/builtin/terraform"]';

function lockInfo(id: string): LockInfo {
  return {
    ID: id,
    Operation: 'OperationTypeApply',
    Info: '',
    Who: 'alice@laptop',
    Version: '1.11.4',
    Created: '2026-11-30T00:00:00Z',
    Path: '',
    FutureField: { kept: true },
  };
}

function instance(input: string, key?: number | string): InstanceObjectV4 {
  return {
    ...(key === undefined ? {} : { index_key: key }),
    schema_version: 0,
    attributes: { id: `id-${input}`, input: { value: input, type: 'string' } },
    sensitive_attributes: [],
  };
}

function document(serial: number, instances: Record<string, InstanceObjectV4[]>): StateDocumentV4 {
  return {
    version: 4,
    terraform_version: '1.11.4',
    serial,
    lineage: 'lineage-1',
    outputs: { out: { value: serial, type: 'number' } },
    resources: Object.entries(instances).map(([name, objects]) => ({
      mode: 'managed' as const,
      type: 'terraform_data',
      name,
      provider: PROVIDER,
      instances: objects,
    })),
    check_results: null,
  };
}

const lock = (id: string, newStateId = ID): StateCommand => ({
  type: 'LockState',
  data: { name: NAME, newStateId, lockInfo: lockInfo(id) },
  metadata: ctx,
});
const unlock = (lockId: string): StateCommand => ({
  type: 'UnlockState',
  data: { name: NAME, lockId },
  metadata: ctx,
});
const forceUnlock: StateCommand = { type: 'ForceUnlockState', data: { name: NAME }, metadata: ctx };
const del: StateCommand = { type: 'DeleteState', data: { name: NAME }, metadata: ctx };
/** The checksum is of the bytes sent, so one document always has the same one. */
const checksumOf = (doc: StateDocumentV4) =>
  createHash('sha256').update(JSON.stringify(doc)).digest('hex');
const commit = (doc: StateDocumentV4, extra: Partial<CommitState['data']> = {}): CommitState => ({
  type: 'CommitState',
  data: {
    name: NAME,
    newStateId: ID,
    document: doc,
    instances: flattenInstances(doc),
    source: 'http',
    checksum: checksumOf(doc),
    ...extra,
  },
  metadata: ctx,
});

const { given, eventsOf: after } = deciderSpec(stateDecider);

const created: StateEvent[] = [{ type: 'StateCreated', data: { stateId: ID, name: NAME } }];
const lockedBy = (id: string): StateEvent[] => [
  {
    type: 'LockAcquired',
    data: { stateId: ID, lockId: id, info: lockInfo(id), mode: 'write', acquiredAt: ctx.now },
  },
];
const doc1 = document(1, { a: [instance('a')], b: [instance('b0', 0), instance('b1', 1)] });
const committed1 = after([created], commit(doc1));
const deleted: StateEvent[] = [{ type: 'StateDeleted', data: { stateId: ID } }];

describe('State decider', () => {
  describe('LockState', () => {
    it('creates a missing state, then locks it', () => {
      given()
        .when(lock('L1'))
        .then([...created, ...lockedBy('L1')]);
    });

    it('locks an unlocked state', () => {
      given(created, committed1).when(lock('L1')).then(lockedBy('L1'));
    });

    it('refuses while another lock is held, returning the holder as it was sent', () => {
      given(created, lockedBy('L1'))
        .when(lock('L2'))
        .thenFails('STATE.LOCKED', { holder: lockInfo('L1') });
    });

    it("grants a retry of the holder's own LOCK (the same LockInfo) without new events", () => {
      given(created, lockedBy('L1')).when(lock('L1')).then([]);
    });

    it('refuses the holder ID with another LockInfo: a second process reusing the ID', () => {
      const reused: StateCommand = {
        type: 'LockState',
        data: { name: NAME, newStateId: ID, lockInfo: { ...lockInfo('L1'), Who: 'bob@other' } },
        metadata: ctx,
      };
      given(created, lockedBy('L1'))
        .when(reused)
        .thenFails('STATE.LOCKED', { holder: lockInfo('L1') });
    });

    it('locks again once the lock was released', () => {
      const released: StateEvent[] = [
        { type: 'LockReleased', data: { stateId: ID, lockId: 'L1', forced: false } },
      ];
      given(created, lockedBy('L1'), released).when(lock('L2')).then(lockedBy('L2'));
    });

    it('brings a deleted name back under a new stateId', () => {
      given(created, committed1, deleted)
        .when(lock('L9', 'state-id-2'))
        .then([
          { type: 'StateCreated', data: { stateId: 'state-id-2', name: NAME } },
          {
            type: 'LockAcquired',
            data: {
              stateId: 'state-id-2',
              lockId: 'L9',
              info: lockInfo('L9'),
              mode: 'write',
              acquiredAt: ctx.now,
            },
          },
        ]);
    });
  });

  describe('UnlockState', () => {
    it('releases a lock with the holder ID', () => {
      given(created, lockedBy('L1'))
        .when(unlock('L1'))
        .then([{ type: 'LockReleased', data: { stateId: ID, lockId: 'L1', forced: false } }]);
    });

    it('refuses another ID, returning the holder', () => {
      given(created, lockedBy('L1'))
        .when(unlock('L2'))
        .thenFails('STATE.LOCK_MISMATCH', { holder: lockInfo('L1') });
    });

    it('succeeds without events on an unlocked state', () => {
      given(created).when(unlock('L1')).then([]);
    });

    it('does not find a missing or deleted state', () => {
      given().when(unlock('L1')).thenFails('STATE.NOT_FOUND');
      given(created, deleted).when(unlock('L1')).thenFails('STATE.NOT_FOUND');
    });
  });

  describe('ForceUnlockState', () => {
    it('releases whatever lock is held, marked as forced', () => {
      given(created, lockedBy('L1'))
        .when(forceUnlock)
        .then([{ type: 'LockReleased', data: { stateId: ID, lockId: 'L1', forced: true } }]);
    });

    it('does nothing on an unlocked state', () => {
      given(created).when(forceUnlock).then([]);
    });
    it('releases only the named lock when given one, refusing another holder', () => {
      const pinned = (lockId: string): StateCommand => ({
        type: 'ForceUnlockState',
        data: { name: NAME, lockId },
        metadata: ctx,
      });
      given(created, lockedBy('L1'))
        .when(pinned('L1'))
        .then([{ type: 'LockReleased', data: { stateId: ID, lockId: 'L1', forced: true } }]);
      given(created, lockedBy('L2'))
        .when(pinned('L1'))
        .thenFails('STATE.LOCK_MISMATCH', { holder: lockInfo('L2') });
      given(created).when(pinned('L1')).then([]);
    });

    it('does not find a missing or deleted state', () => {
      given().when(forceUnlock).thenFails('STATE.NOT_FOUND');
      given(created, deleted).when(forceUnlock).thenFails('STATE.NOT_FOUND');
    });
  });

  describe('CommitState', () => {
    it('creates a missing state and opens a lifecycle for every instance', () => {
      const events = given().when(commit(doc1)).events();
      expect(events.map((e) => e.type)).toEqual([
        'StateCreated',
        'ApplyCommitted',
        'LifecycleOpened',
        'LifecycleOpened',
        'LifecycleOpened',
      ]);
      expect(events[1]).toEqual({
        type: 'ApplyCommitted',
        data: {
          stateId: ID,
          version: 1,
          serial: 1,
          lineage: 'lineage-1',
          source: 'http',
          terraformVersion: '1.11.4',
          outputs: { out: { value: 1, type: 'number' } },
          outputChanges: { closed: [], opened: ['out'] },
          checkResults: null,
          extra: {},
          checksum: checksumOf(doc1),
          instanceCount: 3,
          resourceCount: 2,
        },
      });
      expect(events[3]).toEqual({
        type: 'LifecycleOpened',
        data: {
          stateId: ID,
          version: 1,
          serial: 1,
          address: 'terraform_data.b[0]',
          hash: flattenInstances(doc1)[1].hash,
          resource: {
            module: '',
            mode: 'managed',
            type: 'terraform_data',
            name: 'b',
            provider: PROVIDER,
            each: null,
          },
          instance: instance('b0', 0),
        },
      });
    });

    it('emits only the delta: a changed instance is closed and opened, the rest is silent', () => {
      const doc2 = document(2, { a: [instance('a')], b: [instance('b0', 0), instance('B1', 1)] });
      const events = given(created, committed1).when(commit(doc2)).events();
      const oldHash = flattenInstances(doc1)[2].hash;
      const newHash = flattenInstances(doc2)[2].hash;
      expect(events.slice(1)).toEqual([
        {
          type: 'LifecycleClosed',
          data: {
            stateId: ID,
            version: 2,
            serial: 2,
            address: 'terraform_data.b[1]',
            hash: oldHash,
          },
        },
        expect.objectContaining({
          type: 'LifecycleOpened',
          data: expect.objectContaining({
            version: 2,
            address: 'terraform_data.b[1]',
            hash: newHash,
            instance: instance('B1', 1),
          }),
        }),
      ]);
      expect(events[0]).toMatchObject({ type: 'ApplyCommitted', data: { version: 2, serial: 2 } });
    });

    it('decides the delta on the hashes the command carries', () => {
      const doc2 = document(2, { a: [instance('a')], b: [instance('b0', 0), instance('B1', 1)] });
      // Hashes from a memo that answers b[0] wrongly: the decider must use them, not re-hash.
      const known = new Map(flattenInstances(doc1).map((i) => [i.address, i.hash]));
      const instances = flattenInstances(doc2, (address) =>
        address === 'terraform_data.b[0]' ? 'memo' : known.get(address)!,
      );
      const events = given(created, committed1).when(commit(doc2, { instances })).events();
      expect(events.map((e) => [e.type, 'address' in e.data ? e.data.address : null])).toEqual([
        ['ApplyCommitted', null],
        ['LifecycleClosed', 'terraform_data.b[0]'],
        ['LifecycleOpened', 'terraform_data.b[0]'],
      ]);
      expect(events[2]).toMatchObject({ data: { hash: 'memo' } });
    });

    it('closes removed instances and opens added ones', () => {
      const doc2 = document(2, { a: [instance('a')], c: [instance('c')] });
      const events = given(created, committed1).when(commit(doc2)).events();
      expect(events.map((e) => [e.type, 'address' in e.data ? e.data.address : null])).toEqual([
        ['ApplyCommitted', null],
        ['LifecycleClosed', 'terraform_data.b[0]'],
        ['LifecycleClosed', 'terraform_data.b[1]'],
        ['LifecycleOpened', 'terraform_data.c'],
      ]);
    });

    it('takes a retry of the last commit (same bytes, source and lock) as done: no new version', () => {
      given(created, committed1).when(commit(doc1)).then([]);
      const locked1 = after([created, lockedBy('L1')], commit(doc1, { lockId: 'L1' }));
      given(created, lockedBy('L1'), locked1)
        .when(commit(doc1, { lockId: 'L1' }))
        .then([]);
    });

    it('keeps the same document as a new version when it is not a retry', () => {
      const newVersion = [
        {
          type: 'ApplyCommitted',
          data: expect.objectContaining({ version: 2, serial: 1, instanceCount: 3 }),
        } as StateEvent,
      ];
      // Other bytes (another checksum), another source, or under another lock.
      given(created, committed1)
        .when(commit(doc1, { checksum: 'other' }))
        .then(newVersion);
      given(created, committed1)
        .when(commit(doc1, { source: 'import' }))
        .then(newVersion);
      given(created, committed1, lockedBy('L2'))
        .when(commit(doc1, { lockId: 'L2' }))
        .then(newVersion);
    });

    it('takes a retried refresh commit as done, even though its base version is now old', () => {
      const refreshed = after(
        [created, committed1],
        commit(doc1, { source: 'refresh', checksum: 'r', baseVersion: 1 }),
      );
      given(created, committed1, refreshed)
        .when(commit(doc1, { source: 'refresh', checksum: 'r', baseVersion: 1 }))
        .then([]);
      given(created, committed1, refreshed)
        .when(commit(doc1, { source: 'refresh', checksum: 'r2', baseVersion: 1 }))
        .thenFails('STATE.VERSION_CONFLICT');
    });

    it('keeps a commit with a lower serial as a new version', () => {
      const doc0 = document(0, { a: [instance('a')] });
      const events = given(created, committed1).when(commit(doc0)).events();
      expect(events[0]).toMatchObject({ type: 'ApplyCommitted', data: { version: 2, serial: 0 } });
      expect(events.filter((e) => e.type === 'LifecycleClosed')).toHaveLength(2);
    });

    it('numbers versions 1, 2, 3… whatever the serial does', () => {
      let history: StateEvent[][] = [created];
      for (const [i, serial] of [5, 5, 3, 9].entries()) {
        history = [
          ...history,
          after(history, commit(document(serial, { a: [instance(`${serial}-${i}`)] }))),
        ];
      }
      const versions = history
        .flat()
        .filter((e) => e.type === 'ApplyCommitted')
        .map((e) => (e.type === 'ApplyCommitted' ? e.data.version : 0));
      expect(versions).toEqual([1, 2, 3, 4]);
    });

    it('writes to an unlocked state with or without a lock ID', () => {
      expect(given(created).when(commit(doc1)).events()[0].type).toBe('ApplyCommitted');
      expect(
        given(created)
          .when(commit(doc1, { lockId: 'L1' }))
          .events()[0].type,
      ).toBe('ApplyCommitted');
    });

    it('requires the holder ID on a locked state', () => {
      const g = given(created, lockedBy('L1'));
      g.when(commit(doc1)).thenFails('STATE.LOCKED', { holder: lockInfo('L1') });
      g.when(commit(doc1, { lockId: 'L2' })).thenFails('STATE.LOCK_MISMATCH', {
        holder: lockInfo('L1'),
      });
      expect(g.when(commit(doc1, { lockId: 'L1' })).events()[0]).toMatchObject({
        type: 'ApplyCommitted',
        data: { version: 1 },
      });
    });

    it('starts a deleted name over: new stateId, version 1, nothing to close', () => {
      const events = given(created, committed1, deleted)
        .when(commit(doc1, { newStateId: 'state-id-2' }))
        .events();
      expect(events[0]).toEqual({
        type: 'StateCreated',
        data: { stateId: 'state-id-2', name: NAME },
      });
      expect(events[1]).toMatchObject({
        type: 'ApplyCommitted',
        data: { stateId: 'state-id-2', version: 1 },
      });
      expect(events.slice(2).every((e) => e.type === 'LifecycleOpened')).toBe(true);
      expect(events).toHaveLength(5);
    });

    it('records the real change between two terraform applies as one close and one open', () => {
      const v1 = parseStateDocument(fixtureText('modules.v1.tfstate.txt'));
      const v2 = parseStateDocument(fixtureText('modules.v2.tfstate.txt'));
      const first = after([], commit(v1));
      const events = given(first).when(commit(v2)).events();
      expect(events.map((e) => e.type)).toEqual([
        'ApplyCommitted',
        'LifecycleClosed',
        'LifecycleOpened',
      ]);
      expect(events[0]).toMatchObject({ data: { version: 2, serial: 18, instanceCount: 16 } });
      expect(events[1]).toMatchObject({ data: { address: 'terraform_data.changeable' } });
      expect(events[2]).toMatchObject({ data: { address: 'terraform_data.changeable' } });
    });

    it('names the outputs a version closed and opened: a changed one is both', () => {
      const withOutputs = (serial: number, outputs: StateDocumentV4['outputs']) => ({
        ...document(serial, { a: [instance('a')] }),
        outputs,
      });
      const first = after(
        [],
        commit(
          withOutputs(1, {
            kept: { value: { x: 1, y: [2] }, type: ['object', {}] },
            changed: { value: 'a', type: 'string' },
            gone: { value: true, type: 'bool' },
            hidden: { value: 's', type: 'string' },
          }),
        ),
      );
      const [applied] = given(first)
        .when(
          commit(
            withOutputs(2, {
              // The same value spelled in another key order is the same output.
              kept: { type: ['object', {}], value: { y: [2], x: 1 } },
              changed: { value: 'b', type: 'string' },
              added: { value: 2, type: 'number' },
              hidden: { value: 's', type: 'string', sensitive: true },
            }),
          ),
        )
        .events();
      expect(applied).toMatchObject({
        type: 'ApplyCommitted',
        data: {
          outputChanges: {
            closed: ['changed', 'gone', 'hidden'],
            opened: ['changed', 'added', 'hidden'],
          },
        },
      });
    });

    it('decides output changes on a history written before it named them', () => {
      const older = committed1.map((e) => {
        if (e.type !== 'ApplyCommitted') return e;
        const { outputChanges: _named, ...data } = e.data;
        return { ...e, data };
      });
      const doc2 = { ...document(2, { a: [instance('a')] }), outputs: doc1.outputs };
      const [applied] = given(created, older).when(commit(doc2)).events();
      expect(applied).toMatchObject({ data: { outputChanges: { closed: [], opened: [] } } });
    });

    it('commits a document based on the current version', () => {
      const doc2 = document(2, { a: [instance('a2')], b: [instance('b0', 0), instance('b1', 1)] });
      const events = given(created, committed1)
        .when(commit(doc2, { source: 'refresh', baseVersion: 1 }))
        .events();
      expect(events[0]).toMatchObject({
        type: 'ApplyCommitted',
        data: { version: 2, source: 'refresh' },
      });
    });

    it('refuses a document based on a version that is no longer current', () => {
      const doc2 = document(2, { a: [instance('a2')] });
      const committed2 = after([created, committed1], commit(doc2));
      given(created, committed1, committed2)
        .when(commit(document(3, { a: [instance('a3')] }), { baseVersion: 1 }))
        .thenFails('STATE.VERSION_CONFLICT', { expected: 1, actual: 2 });
    });

    it('records a change of lineage on the commit, and only then', () => {
      const other = { ...document(2, { a: [instance('a')] }), lineage: 'lineage-2' };
      const [changed] = given(created, committed1).when(commit(other)).events();
      expect(changed).toMatchObject({
        type: 'ApplyCommitted',
        data: { version: 2, lineage: 'lineage-2' },
      });
      expect(changed.data).toHaveProperty('lineageChanged', {
        from: 'lineage-1',
        to: 'lineage-2',
      });
      const same = given(created, committed1)
        .when(commit(document(2, {})))
        .events()[0];
      expect(same.data).not.toHaveProperty('lineageChanged');
      expect(committed1[0].data).not.toHaveProperty('lineageChanged');
      // A deleted name starts over: its first lineage is no change.
      const reborn = given(created, committed1, deleted)
        .when(commit(other, { newStateId: 'state-id-2' }))
        .events();
      expect(reborn[1].data).not.toHaveProperty('lineageChanged');
    });
    describe('checked for continuity (an import)', () => {
      const checked = (d: StateDocumentV4) =>
        commit(d, { source: 'import', checkContinuity: true });
      const history = [created, committed1];
      it('refuses another lineage, naming both', () => {
        given(...history)
          .when(checked({ ...document(5, {}), lineage: 'other' }))
          .thenFails('STATE.LINEAGE_CONFLICT', { current: 'lineage-1', sent: 'other' });
      });
      it('refuses an older serial, and takes the same or a newer one', () => {
        const newer = after(history, commit(document(3, {})));
        given(...history, newer)
          .when(checked(document(2, {})))
          .thenFails('STATE.SERIAL_CONFLICT', { current: 3, sent: 2 });
        expect(
          given(...history, newer)
            .when(checked(document(3, {})))
            .events()[0],
        ).toMatchObject({ type: 'ApplyCommitted', data: { version: 3, serial: 3 } });
        expect(
          given(...history)
            .when(checked(document(7, {})))
            .events()[0],
        ).toMatchObject({
          data: { version: 2, serial: 7 },
        });
      });
      it('takes anything into a state with no version yet', () => {
        const other = { ...document(0, {}), lineage: 'other' };
        expect(given().when(checked(other)).events()[1]).toMatchObject({
          type: 'ApplyCommitted',
          data: { version: 1, lineage: 'other' },
        });
        expect(given(created).when(checked(other)).events()[0]).toMatchObject({
          data: { version: 1, lineage: 'other' },
        });
        expect(given(created, committed1, deleted).when(checked(other)).events()[1]).toMatchObject({
          data: { version: 1, lineage: 'other' },
        });
      });
    });
    it('never recreates a deleted or missing state for a write based on a version', () => {
      given(created, committed1, deleted)
        .when(commit(doc1, { baseVersion: 1 }))
        .thenFails('STATE.NOT_FOUND');
      given()
        .when(commit(doc1, { baseVersion: 0 }))
        .thenFails('STATE.NOT_FOUND');
    });
  });

  describe('DeleteState', () => {
    it('deletes an unlocked state', () => {
      given(created, committed1).when(del).then(deleted);
    });

    it('refuses while locked', () => {
      given(created, lockedBy('L1'))
        .when(del)
        .thenFails('STATE.LOCKED', { holder: lockInfo('L1') });
    });

    it('does not find a missing or already deleted state', () => {
      given().when(del).thenFails('STATE.NOT_FOUND');
      given(created, deleted).when(del).thenFails('STATE.NOT_FOUND');
    });
  });

  describe('evolve and snapshots', () => {
    const v1 = parseStateDocument(fixtureText('modules.v1.tfstate.txt'));
    const v2 = parseStateDocument(fixtureText('modules.v2.tfstate.txt'));
    const h1 = after([], commit(v1));
    const h2 = after([h1], commit(v2, { lockId: undefined }));
    const history = [h1, h2, lockedBy('L1')];
    const state = given(...history).state;

    it('tracks exactly the current instances and their hashes', () => {
      expect(state).toMatchObject({ status: 'active', stateId: ID, version: 2, serial: 18 });
      const expected = new Map(flattenInstances(v2).map((i) => [i.address, i.hash]));
      expect(state.status === 'active' && new Map(state.instances)).toEqual(expected);
    });

    it('does not change the state it evolves from', () => {
      const before = given(h1).state;
      const copy = toSnapshot(before);
      h2.reduce(evolve, before);
      expect(toSnapshot(before)).toEqual(copy);
    });

    it('round-trips through a plain-JSON snapshot and decides the same', () => {
      const json: unknown = JSON.parse(JSON.stringify(toSnapshot(state)));
      const restored: StateAggregate = fromSnapshot(json);
      expect(restored).toEqual(state);
      const v3 = { ...v2, serial: 19, resources: v2.resources.slice(1) };
      expect(decide(commit(v3, { lockId: 'L1' }), restored)).toEqual(
        decide(commit(v3, { lockId: 'L1' }), state),
      );
      for (const s of [initialState(), given(created, deleted).state]) {
        expect(fromSnapshot(JSON.parse(JSON.stringify(toSnapshot(s))))).toEqual(s);
      }
    });

    it('rejects a malformed snapshot', () => {
      expect(() => fromSnapshot({ status: 'active', stateId: 1 })).toThrow(
        expect.objectContaining({ code: 'SNAPSHOT.INVALID' }),
      );
    });

    it('takes commands of plain data', () => {
      for (const command of [commit(doc1, { lockId: 'L1', baseVersion: 1 }), lock('L1'), del]) {
        expect(JSON.parse(JSON.stringify(command))).toStrictEqual(command);
      }
    });

    it('emits plain JSON events with literal type names', () => {
      const events = history.flat();
      expect(JSON.parse(JSON.stringify(events))).toEqual(events);
      expect(Object.values(StateEventType)).toEqual(
        expect.arrayContaining([...new Set(events.map((e) => e.type))]),
      );
      expect(
        JSON.stringify(events, (_k, v: unknown) => {
          if (typeof v === 'bigint') throw new Error('bigint in event data');
          return v;
        }),
      ).toBeDefined();
    });
  });
});
