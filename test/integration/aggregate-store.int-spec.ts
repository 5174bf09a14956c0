import { randomUUID } from 'node:crypto';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { Decider } from '../../src/domain/shared/decider';
import { DomainError } from '../../src/domain/shared/domain-error';
import { CommandContext, DomainEvent, EVENT_SCHEMA_VERSION } from '../../src/domain/shared/event';
import { Notifier } from '../../src/infrastructure/postgres/notifier';
import { PostgresEventStore } from '../../src/infrastructure/event-store/postgres-event-store';
import { PostgresSnapshotStore } from '../../src/infrastructure/event-store/postgres-snapshot-store';
import { AggregateStore } from '../../src/application/aggregate-store';
import { AggregateSpec, DeciderService } from '../../src/application/decider.service';
import type { EventStore, ReadStreamOptions } from '../../src/application/ports/event-store.port';
import { STATE } from '../../src/application/state/state-aggregate';
import { fromSnapshot, StateCommand, stateStreamId } from '../../src/domain/state';
import { flattenInstances } from '../../src/domain/terraform';
import { lockInfo, testDocument } from '../support/state-harness';

/** A counter that refuses to go past a limit: enough to see rehydration at work. */
type Added = DomainEvent<'Added', { n: number }>;
type Add = { n: number; limit: number };
const counter: Decider<Add, { total: number }, Added> = {
  initialState: () => ({ total: 0 }),
  evolve: (s, e) => ({ total: s.total + e.data.n }),
  decide: (c, s) => {
    if (s.total + c.n > c.limit) throw new DomainError('REQUEST.INVALID', 'full');
    return [{ type: 'Added', data: { n: c.n } }];
  },
};

/** What every store here shares: the counter, snapshotted as it is. */
const counterOptions = {
  ids: { uuid: randomUUID },
  snapshotSchema: 'counter/1',
  toSnapshot: (s: { total: number }) => s,
  fromSnapshot: (j: unknown) => j as { total: number },
};

const ctx = (): CommandContext => ({
  actor: 'test',
  correlationId: randomUUID(),
  now: '2026-01-01T00:00:00.000Z',
});

describe('AggregateStore on PostgreSQL', () => {
  let t: TestDatabase;
  let notifier: Notifier;
  let events: PostgresEventStore;
  const reads: { stream: string; from: bigint }[] = [];
  let spy: EventStore;

  beforeAll(async () => {
    t = await createTestDatabase();
    notifier = new Notifier(t.url);
    events = new PostgresEventStore(t.db, notifier);
    spy = Object.assign(Object.create(events) as EventStore, {
      readStream: (stream: string, o?: ReadStreamOptions) => {
        reads.push({ stream, from: o?.fromRevision ?? 0n });
        return events.readStream(stream, o);
      },
    });
  });
  afterAll(async () => {
    await notifier.close();
    await t.drop();
  });

  const store = () =>
    new AggregateStore(spy, new PostgresSnapshotStore(t.db), counter, {
      ...counterOptions,
      snapshotEvery: 10,
    });

  it('decides on a warm stream without reading it, and reads only the tail when cold', async () => {
    const stream = `counter-${randomUUID()}`;
    const warm = store();
    for (let i = 0; i < 25; i++) {
      await warm.handle(stream, { n: 1, limit: 1000 }, ctx());
      await warm.snapshotsWritten(); // written after the command answered
    }
    // Warm: only the first command read (the stream did not exist); the
    // others appended at the revision they knew.
    const mine = reads.filter((r) => r.stream === stream);
    expect(mine.map((r) => r.from)).toEqual([0n]);
    expect(await events.readStream(stream)).toHaveLength(25);

    reads.length = 0;
    const cold = store(); // another replica, or a restart
    const r = await cold.handle(stream, { n: 1, limit: 1000 }, ctx());
    expect(r.state.total).toBe(26);
    // Snapshots were written at revisions 9 and 19: a cold start reads from 20.
    expect(reads.filter((x) => x.stream === stream).map((x) => x.from)).toEqual([20n]);
  });

  it('keeps a stream that does not exist warm too: its snapshot is looked up once', async () => {
    const stream = `counter-${randomUUID()}`;
    const snapshots = new PostgresSnapshotStore(t.db);
    const lookups = jest.spyOn(snapshots, 'load');
    const warm = new AggregateStore(spy, snapshots, counter, counterOptions);
    for (let i = 0; i < 3; i++) expect((await warm.state(stream)).total).toBe(0);
    expect(lookups).toHaveBeenCalledTimes(1);
    // Still read up to date: another writer creates it, and the next read sees it.
    await store().handle(stream, { n: 2, limit: 1000 }, ctx());
    expect((await warm.state(stream)).total).toBe(2);
    expect(lookups).toHaveBeenCalledTimes(1);
  });

  it('answers before its snapshot is written, and the snapshot is the state at its revision', async () => {
    const stream = `counter-${randomUUID()}`;
    const snapshots = new PostgresSnapshotStore(t.db);
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const saved: bigint[] = [];
    const slow = new AggregateStore(
      spy,
      {
        load: (id) => snapshots.load(id),
        save: async (id, snap) => {
          saved.push(snap.revision);
          await gate;
          return snapshots.save(id, snap);
        },
      },
      counter,
      {
        ...counterOptions,
        snapshotEvery: 5,
      },
    );
    // Revision 4 makes a snapshot due; its save hangs, yet every command answers.
    for (let i = 0; i < 12; i++) await slow.handle(stream, { n: 1, limit: 1000 }, ctx());
    await new Promise((r) => setImmediate(r));
    expect(saved).toEqual([4n]); // one at a time per stream
    expect(await snapshots.load(stream)).toBeNull();
    open();
    await slow.snapshotsWritten();
    // The fold of revisions 0..4, not the state of the commands that ran meanwhile.
    expect(await snapshots.load(stream)).toMatchObject({ revision: 4n, state: { total: 5 } });
    reads.length = 0;
    const cold = await store().handle(stream, { n: 1, limit: 1000 }, ctx());
    expect(cold.state.total).toBe(13);
    expect(reads.filter((x) => x.stream === stream).map((x) => x.from)).toEqual([5n]);
    // The next one is due counting from revision 4: the 13th command (revision 12).
    await slow.handle(stream, { n: 1, limit: 1000 }, ctx());
    await slow.snapshotsWritten();
    expect(saved).toEqual([4n, 13n]);
    expect(await snapshots.load(stream)).toMatchObject({ revision: 13n, state: { total: 14 } });
  });

  it('as kld stops, waits for the snapshots being written, not for one whose command has not answered', async () => {
    const [a, b] = [`counter-${randomUUID()}`, `counter-${randomUUID()}`];
    const saved: string[] = [];
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const store = new AggregateStore(
      spy,
      {
        load: () => Promise.resolve(null),
        save: async (id, snap) => {
          saved.push(`${id}@${snap.revision}`);
          await gate;
        },
      },
      counter,
      { ...counterOptions, snapshotEvery: 2 },
    );
    const turns = async (check: () => boolean) => {
      for (let i = 0; i < 1000 && !check(); i++) await new Promise((r) => setImmediate(r));
    };
    // a's second command makes a snapshot due; it answered, and its save hangs.
    await store.handle(a, { n: 1, limit: 1000 }, ctx());
    await store.handle(a, { n: 1, limit: 1000 }, ctx());
    await turns(() => saved.length > 0);
    expect(saved).toEqual([`${a}@1`]);
    // b's makes one due too, but the command waits for its read models,
    // which only the stop's next step would end: it has not answered.
    let answer!: () => void;
    const answered = new Promise<void>((resolve) => (answer = resolve));
    await store.handle(b, { n: 1, limit: 1000 }, ctx());
    await store.handle(b, { n: 1, limit: 1000 }, ctx(), {
      queueSeconds: 0,
      conflicts: 0,
      answered,
    });
    let stopped = false;
    const stopping = store.stopSnapshots().then(() => (stopped = true));
    await turns(() => stopped);
    expect(stopped).toBe(false); // a's save is still under way
    open();
    await stopping;
    answer();
    await store.snapshotsWritten();
    expect(saved).toEqual([`${a}@1`]); // b's was never started
  });

  it('spaces snapshots by what the state says its snapshot is worth', async () => {
    const stream = `counter-${randomUUID()}`;
    const saved: bigint[] = [];
    const spaced = new AggregateStore(
      spy,
      {
        load: () => Promise.resolve(null),
        save: (_id, snap) => {
          saved.push(snap.revision);
          return Promise.resolve();
        },
      },
      counter,
      {
        ...counterOptions,
        snapshotEvery: 2,
        snapshotSpacing: (s) => (s.total < 10 ? 0 : 6),
      },
    );
    for (let i = 0; i < 20; i++) {
      await spaced.handle(stream, { n: 1, limit: 1000 }, ctx());
      await spaced.snapshotsWritten();
    }
    // Every 2 events while the total is below 10 (revision 9 holds 10), then every 6.
    expect(saved).toEqual([1n, 3n, 5n, 7n, 13n, 19n]);
  });

  it('sees what another writer appended since, and decides on it', async () => {
    const stream = `counter-${randomUUID()}`;
    const a = store();
    const b = store();
    await a.handle(stream, { n: 5, limit: 10 }, ctx());
    await b.handle(stream, { n: 5, limit: 10 }, ctx());
    // a's cache is stale (total 5); the tail read brings it to 10 and it refuses.
    await expect(a.handle(stream, { n: 2, limit: 10 }, ctx())).rejects.toMatchObject({
      code: 'REQUEST.INVALID',
    });
  });

  it('refuses on a warm stream with one decision when its tail adds nothing', async () => {
    const stream = `counter-${randomUUID()}`;
    let decided = 0;
    const counting: typeof counter = {
      ...counter,
      decide: (c, s) => {
        decided++;
        return counter.decide(c, s);
      },
    };
    const a = new AggregateStore(spy, new PostgresSnapshotStore(t.db), counting, counterOptions);
    await a.handle(stream, { n: 5, limit: 10 }, ctx());
    decided = 0;
    reads.length = 0;
    await expect(a.handle(stream, { n: 6, limit: 10 }, ctx())).rejects.toMatchObject({
      code: 'REQUEST.INVALID',
    });
    // Refused on the tail just read (nothing), without deciding a second time.
    expect(reads.filter((x) => x.stream === stream).map((x) => x.from)).toEqual([1n]);
    expect(decided).toBe(1);
    // When the tail brings something, the command is decided again on it.
    await store().handle(stream, { n: -5, limit: 10 }, ctx());
    decided = 0;
    expect((await a.handle(stream, { n: 6, limit: 10 }, ctx())).state.total).toBe(6);
    expect(decided).toBe(2);
  });

  it('decides again on the tail when another writer got ahead of its warm stream', async () => {
    const stream = `counter-${randomUUID()}`;
    const a = store();
    const b = store();
    await a.handle(stream, { n: 9, limit: 10 }, ctx());
    await b.handle(stream, { n: -5, limit: 10 }, ctx());
    // a knows a total of 9: 9 + 3 is refused there, but the stream holds 4.
    reads.length = 0;
    const r = await a.handle(stream, { n: 3, limit: 10 }, ctx());
    expect(r.state.total).toBe(7);
    expect(reads.filter((x) => x.stream === stream).map((x) => x.from)).toEqual([1n]);
    // An append on what a knew (7 + 2) is refused, and 9 + 2 is over the limit.
    await b.handle(stream, { n: 2, limit: 10 }, ctx());
    await expect(a.handle(stream, { n: 2, limit: 10 }, ctx())).rejects.toMatchObject({
      code: 'REQUEST.INVALID',
    });
    expect((await events.readStream(stream)).map((e) => (e.data as { n: number }).n)).toEqual([
      9, -5, 3, 2,
    ]);
  });

  it('of many racing commands on one stream, each is decided on the latest state', async () => {
    const stream = `counter-${randomUUID()}`;
    const replicas = [store(), store(), store()];
    const results = await Promise.allSettled(
      Array.from({ length: 30 }, (_, i) =>
        replicas[i % 3].handle(stream, { n: 1, limit: 20 }, ctx()),
      ),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(20);
    expect(
      results
        .filter((r): r is PromiseRejectedResult => r.status === 'rejected')
        .every((r) => (r.reason as DomainError).code === 'REQUEST.INVALID'),
    ).toBe(true);
    expect(await events.readStream(stream)).toHaveLength(20);
  });

  it('gives each decided event an id from the Ids port and the current schema version', async () => {
    const stream = `counter-${randomUUID()}`;
    const given: string[] = [];
    const ids = {
      uuid: () => {
        given.push(randomUUID());
        return given[given.length - 1];
      },
    };
    const withIds = new AggregateStore(spy, new PostgresSnapshotStore(t.db), counter, {
      ids,
      snapshotSchema: 'counter/1',
      toSnapshot: (s) => s,
      fromSnapshot: (j) => j as { total: number },
    });
    await withIds.handle(stream, { n: 1, limit: 10 }, ctx());
    await withIds.handle(stream, { n: 2, limit: 10 }, ctx());
    const stored = await events.readStream(stream);
    expect(stored.map((e) => e.eventId)).toEqual(given);
    expect(stored.map((e) => e.schemaVersion)).toEqual([
      EVENT_SCHEMA_VERSION,
      EVENT_SCHEMA_VERSION,
    ]);
  });

  it('sends an append whose answer was lost once more, and the store keeps it once', async () => {
    const stream = `counter-${randomUUID()}`;
    let lost = 0;
    const flaky: EventStore = {
      ...spy,
      appendToStream: async (...a) => {
        const result = await events.appendToStream(...a);
        // Stored, but the answer never arrives (as when the connection drops after COMMIT).
        if (lost++ === 0) throw new Error('Connection terminated unexpectedly');
        return result;
      },
    };
    const store = new AggregateStore(flaky, new PostgresSnapshotStore(t.db), counter, {
      ...counterOptions,
    });
    const r = await store.handle(stream, { n: 3, limit: 10 }, ctx());
    expect(r.state.total).toBe(3);
    const stored = await events.readStream(stream);
    expect(stored.map((e) => e.data)).toEqual([{ n: 3 }]);
    expect(r.position).toEqual(stored[0].position);
    expect(lost).toBe(2);
  });

  it('answers a stored command even when its snapshot cannot be saved', async () => {
    const stream = `counter-${randomUUID()}`;
    const broken = new AggregateStore(
      spy,
      {
        load: () => Promise.resolve(null),
        save: () => Promise.reject(new Error('snapshot table is gone')),
      },
      counter,
      {
        ids: { uuid: randomUUID },
        snapshotSchema: 'counter/1',
        toSnapshot: (s) => s,
        fromSnapshot: (j) => j as never,
        snapshotEvery: 1,
      },
    );
    for (let i = 1; i <= 3; i++) {
      await expect(broken.handle(stream, { n: 1, limit: 10 }, ctx())).resolves.toMatchObject({
        state: { total: i },
      });
    }
    expect(await events.readStream(stream)).toHaveLength(3);
  });

  it('replays the stream when its snapshot cannot be read, and writes a good one', async () => {
    const stream = `counter-${randomUUID()}`;
    const snapshots = new PostgresSnapshotStore(t.db);
    for (let i = 0; i < 12; i++) await store().handle(stream, { n: 1, limit: 1000 }, ctx());
    await snapshots.save(stream, { revision: 11n, schema: 'counter/1', json: '"garbled"' });
    const strict = new AggregateStore(spy, snapshots, counter, {
      ids: { uuid: randomUUID },
      snapshotSchema: 'counter/1',
      toSnapshot: (s) => s,
      fromSnapshot: (j) => {
        if (typeof (j as { total?: unknown }).total !== 'number') {
          throw new DomainError('SNAPSHOT.INVALID', 'counter snapshot: total');
        }
        return j as { total: number };
      },
      snapshotEvery: 10,
    });
    const r = await strict.handle(stream, { n: 1, limit: 1000 }, ctx());
    expect(r.state.total).toBe(13);
    await strict.snapshotsWritten();
    expect(await snapshots.load(stream)).toMatchObject({ revision: 12n, state: { total: 13 } });
  });

  it('gives a command that changes nothing the position of the stream it confirms', async () => {
    const stream = `counter-${randomUUID()}`;
    const noop: Decider<Add, { total: number }, Added> = { ...counter, decide: () => [] };
    const s = store();
    const written = await s.handle(stream, { n: 2, limit: 10 }, ctx());
    const again = await new AggregateStore(spy, new PostgresSnapshotStore(t.db), noop, {
      ...counterOptions,
    }).handle(stream, { n: 2, limit: 10 }, ctx());
    expect(written.readAt).toEqual(written.position);
    expect(again).toMatchObject({ events: [], position: null, readAt: written.position });
    const missing = await new AggregateStore(spy, new PostgresSnapshotStore(t.db), noop, {
      ...counterOptions,
    }).handle(`counter-${randomUUID()}`, { n: 1, limit: 1 }, ctx());
    expect(missing.readAt).toBeNull();
  });

  it('writes a due snapshot only once the command has answered, and the next command uses it', async () => {
    type Command = Add & { stream: string; metadata: CommandContext };
    const snapshots = new PostgresSnapshotStore(t.db);
    const saved: bigint[] = [];
    const failed: [string, string, unknown][] = [];
    let fail = false;
    let caughtUp!: () => void;
    let catchingUp = Promise.resolve();
    let waiting = (): void => undefined;
    const service = new DeciderService({
      events: spy,
      snapshots: {
        load: (id) => snapshots.load(id),
        save: (id, snap) => {
          saved.push(snap.revision);
          return fail ? Promise.reject(new Error('disk full')) : snapshots.save(id, snap);
        },
      },
      // The read models catch up when the test says so: the answer waits for them.
      sync: {
        waitForPosition: () => {
          waiting();
          return catchingUp;
        },
      },
      clock: { now: () => new Date('2026-01-01T00:00:00Z') },
      ids: { uuid: randomUUID },
      snapshotFailed: (aggregate, streamId, err) => failed.push([aggregate, streamId, err]),
    });
    const spec: AggregateSpec<Command, { total: number }, Added> = {
      name: 'counter',
      decider: { ...counter, decide: (c: Command, s: { total: number }) => counter.decide(c, s) },
      streamOf: (c) => c.stream,
      snapshots: {
        schema: 'counter/1',
        to: (s) => s,
        from: (j) => j as { total: number },
        every: 3,
      },
      done: () => 'added',
    };
    const stream = `counter-${randomUUID()}`;
    const add = () => service.execute(spec, { stream, n: 1, limit: 100, metadata: ctx() });
    await add();
    await add();
    // The third event makes a snapshot due while the read models are still catching up.
    catchingUp = new Promise<void>((resolve) => (caughtUp = resolve));
    const appended = new Promise<void>((resolve) => (waiting = resolve));
    const third = add();
    await appended;
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    expect(saved).toEqual([]);
    caughtUp();
    await expect(third).resolves.toMatchObject({ state: { total: 3 } });
    await service.snapshotsWritten();
    expect(saved).toEqual([2n]);
    expect(await snapshots.load(stream)).toMatchObject({ revision: 2n, state: { total: 3 } });

    // Another replica (or a restart) starts from the snapshot: it reads from revision 3.
    reads.length = 0;
    const cold = await store().handle(stream, { n: 1, limit: 100 }, ctx());
    expect(cold.state.total).toBe(4);
    expect(reads.filter((r) => r.stream === stream).map((r) => r.from)).toEqual([3n]);

    // A snapshot that cannot be written is reported, and the stored commands still answer:
    // revision 5 (after the other replica's 3) is the next one due.
    fail = true;
    await expect(add()).resolves.toMatchObject({ state: { total: 5 } });
    await expect(add()).resolves.toMatchObject({ state: { total: 6 } });
    await service.snapshotsWritten();
    expect(saved).toEqual([2n, 5n]);
    expect(failed).toEqual([['counter', stream, new Error('disk full')]]);
  });

  it('never puts a late snapshot over a newer one', async () => {
    const stream = `counter-${randomUUID()}`;
    const snapshots = new PostgresSnapshotStore(t.db);
    await snapshots.save(stream, {
      revision: 20n,
      schema: 'counter/1',
      json: JSON.stringify({ total: 21 }),
    });
    await snapshots.save(stream, {
      revision: 10n,
      schema: 'counter/1',
      json: JSON.stringify({ total: 11 }),
    });
    await snapshots.save(stream, {
      revision: 20n,
      schema: 'counter/1',
      json: JSON.stringify({ total: 99 }),
    });
    expect(await snapshots.load(stream)).toMatchObject({ revision: 20n, state: { total: 21 } });
    await snapshots.save(stream, {
      revision: 30n,
      schema: 'counter/1',
      json: JSON.stringify({ total: 31 }),
    });
    expect(await snapshots.load(stream)).toMatchObject({ revision: 30n, state: { total: 31 } });
  });

  it("keeps as many streams warm as the DeciderService's budget for the aggregate", async () => {
    type Command = Add & { stream: string; metadata: CommandContext };
    const spec = (cacheBudget?: 'streams' | 'refreshRuns') =>
      ({
        name: 'counter',
        decider: {
          ...counter,
          decide: (c: Command, s: { total: number }) => counter.decide(c, s),
        },
        streamOf: (c: Command) => c.stream,
        snapshots: { schema: 'counter/1', to: (s) => s, from: (j) => j as { total: number } },
        cacheBudget,
        done: () => 'added',
      }) satisfies AggregateSpec<Command, { total: number }, Added>;
    const service = new DeciderService({
      events: spy,
      snapshots: new PostgresSnapshotStore(t.db),
      sync: { waitForPosition: () => Promise.resolve() },
      clock: { now: () => new Date('2026-01-01T00:00:00Z') },
      ids: { uuid: randomUUID },
      cache: { streams: 1, refreshRuns: 2 },
    });
    // Where each command on stream a began to read: 0 is cold (the whole stream).
    const readsOfA = async (aggregate: ReturnType<typeof spec>) => {
      const [a, b] = [`counter-${randomUUID()}`, `counter-${randomUUID()}`];
      const add = (stream: string) =>
        service.execute(aggregate, { stream, n: 1, limit: 10, metadata: ctx() });
      reads.length = 0;
      for (const stream of [a, b, a]) await add(stream);
      return reads.filter((r) => r.stream === a).map((r) => r.from);
    };
    // One stream warm: b pushed a out, so a is read whole again.
    expect(await readsOfA(spec())).toEqual([0n, 0n]);
    // Two: a stayed warm, and is decided on without a read.
    expect(await readsOfA(spec('refreshRuns'))).toEqual([0n]);
  });

  it("answers a request on another state while a big state's snapshot is being built", async () => {
    const snapshots = new PostgresSnapshotStore(t.db);
    const service = new DeciderService({
      events: spy,
      snapshots,
      sync: { waitForPosition: () => Promise.resolve() },
      clock: { now: () => new Date('2026-01-01T00:00:00Z') },
      ids: { uuid: randomUUID },
    });
    const order: string[] = [];
    let lockAnswered = false;
    let lockOther!: () => void;
    const text = STATE.snapshots.text!;
    // The big state's snapshot made slow: after its own pieces it goes on
    // (empty pieces, the text unchanged) until the other state's lock has
    // answered, or for 100,000 more pieces.
    const spec: typeof STATE = {
      ...STATE,
      snapshots: {
        ...STATE.snapshots,
        text: function* (state) {
          if (state.status !== 'active' || state.name !== 'big') return yield* text(state);
          order.push('snapshot started');
          lockOther();
          yield* text(state);
          for (let i = 0; i < 100_000 && !lockAnswered; i++) yield '';
          order.push('snapshot built');
        },
      },
    };
    const big = 'big';
    const other = `other-${randomUUID()}`;
    const run = (command: StateCommand) => service.execute(spec, command);
    const document = testDocument(
      1,
      Array.from({ length: 2_000 }, (_, i) => ({ name: 'x', key: i, input: `v${i}` })),
    );
    const commit = (name: string): StateCommand => ({
      type: 'CommitState',
      data: {
        name,
        newStateId: randomUUID(),
        document,
        instances: flattenInstances(document),
        source: 'http',
        checksum: 'sum',
      },
      metadata: ctx(),
    });
    await run(commit(other));
    await service.snapshotsWritten();
    const locked = new Promise<void>((resolve) => {
      lockOther = () => {
        void run({
          type: 'LockState',
          data: { name: other, newStateId: randomUUID(), lockInfo: lockInfo('L1') },
          metadata: ctx(),
        }).then(() => {
          lockAnswered = true;
          order.push('other state locked');
          resolve();
        });
      };
    });
    // 2,002 events: the snapshot is due (one per as many events as addresses).
    const committed = await run(commit(big));
    await locked;
    await service.snapshotsWritten();
    expect(order).toEqual(['snapshot started', 'other state locked', 'snapshot built']);
    // The snapshot is the state the commit left, and a cold load starts from it.
    const saved = await snapshots.load(stateStreamId(big));
    expect(saved?.revision).toBe(2_001n);
    expect(fromSnapshot(saved!.state)).toEqual(committed.state);
  });
});
