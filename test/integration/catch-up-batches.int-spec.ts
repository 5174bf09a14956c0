import { wholeLog } from '../support/whole-log';
import type { RecordedEvent } from '../../src/domain/shared/event';
import { StateEventType } from '../../src/domain/state';
import { Notifier } from '../../src/infrastructure/postgres/notifier';
import { LOCK_NAMESPACE, ProjectionRunner } from '../../src/projections/projection-runner';
import type { Projector } from '../../src/projections/projector';
import { StateHarness, testDocument } from '../support/state-harness';
import { quietLogger } from '../support/test-database';

/**
 * A writer waiting for a big commit applies it in big batches (a commit it
 * holds in memory, up to 25,000 events, in one); the
 * projector's own loop, woken meanwhile, must not cut it up with batches of
 * its size (each one more transaction waiting for the writer's lock, and for
 * a first commit a run of opens too short for COPY).
 */
describe('a writer catching up a big commit', () => {
  let h: StateHarness;
  let notifier: Notifier;
  /** A runner of `projector` alone over the harness's log, woken by this spec's notifier. */
  const runnerOf = (projector: Projector) =>
    new ProjectionRunner({ events: h.events, db: h.db, notifier, logger: quietLogger }).register([
      projector,
    ]);
  beforeAll(async () => {
    h = await StateHarness.create();
    notifier = new Notifier(h.db.url);
  });
  afterAll(async () => {
    await notifier.close();
    await h.close();
  });

  it('is not interleaved with the loop’s batches', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let started!: () => void;
    const first = new Promise<void>((r) => (started = r));
    const batches: number[] = [];
    const spy: Projector = {
      name: 'catch-up-spy',
      handles: [StateEventType.LifecycleOpened],
      tables: [],
      async apply(events) {
        batches.push(events.length);
        if (batches.length === 1) {
          started();
          await held; // the writer's first batch holds the lock a while
        }
      },
    };
    const runner = runnerOf(spy);
    // 26,000 opens: two batches of the writer (25,000 events each from
    // memory, the first two events of the commit are not opens).
    const instances = Array.from({ length: 26_000 }, (_, i) => ({
      name: 'z',
      key: i,
      input: `${i}`,
    }));
    const position = await h.append(
      h.commitCommand('catch-up', testDocument(1, instances), { source: 'import' }),
    );
    const caughtUp = runner.waitForPosition(position!);
    await first;
    runner.start(); // the loop wakes while the writer holds its first batch
    await new Promise((r) => setTimeout(r, 500));
    release();
    await caughtUp;
    await runner.stop();
    // A loop that does not stand aside takes 500 between them: [24998, 500, 500, 2].
    expect(batches).toHaveLength(2);
    expect(batches[0] + batches[1]).toBe(26_000);
  });
  it('is left to the writer when the append wakes the loop first', async () => {
    const batches: number[] = [];
    const spy: Projector = {
      name: 'catch-up-spy-2',
      handles: [StateEventType.LifecycleOpened],
      tables: [],
      apply: async (events) => void batches.push(events.length),
    };
    const runner = runnerOf(spy);
    runner.start();
    await runner.waitForPosition((await h.events.lastPosition())!); // caught up, idle
    batches.length = 0;
    // Another batch (another replica's) holds the projector's lock, so the
    // loop the append wakes waits for it before the writer does.
    const other = await h.db.pool.connect();
    await other.query('SELECT pg_advisory_lock($1, hashtext($2))', [LOCK_NAMESPACE, spy.name]);
    const instances = Array.from({ length: 6_000 }, (_, i) => ({
      name: 'w',
      key: i,
      input: `${i}`,
    }));
    const position = await h.append(
      h.commitCommand('woken', testDocument(1, instances), { source: 'import' }),
    );
    await new Promise((r) => setTimeout(r, 500));
    const caughtUp = runner.waitForPosition(position!);
    await new Promise((r) => setTimeout(r, 100));
    await other.query('SELECT pg_advisory_unlock($1, hashtext($2))', [LOCK_NAMESPACE, spy.name]);
    other.release();
    await caughtUp;
    await runner.stop();
    // The writer's one batch: a loop that did not look again under the lock took 500 first.
    expect(batches).toEqual([6_000]);
  });
  it('starts its projectors applying in their order, each once the one before has begun', async () => {
    // The first projector's lock is held elsewhere for a while: the others'
    // transactions begin meanwhile, but none applies before it has.
    const applying: string[] = [];
    const spy = (name: string): Projector => ({
      name,
      handles: [StateEventType.LifecycleOpened],
      tables: [],
      async apply(events, tx) {
        applying.push(name);
        await tx.query('SELECT $1::int AS n', [events.length]);
      },
    });
    const names = ['turn-first', 'turn-second', 'turn-third'];
    const runner = new ProjectionRunner({
      events: h.events,
      db: h.db,
      notifier,
      logger: quietLogger,
    }).register(names.map(spy));
    await runner.waitForPosition((await h.events.lastPosition())!);
    applying.length = 0;
    const other = await h.db.pool.connect();
    await other.query('SELECT pg_advisory_lock($1, hashtext($2))', [LOCK_NAMESPACE, names[0]]);
    const instances = Array.from({ length: 2_000 }, (_, i) => ({
      name: 't',
      key: i,
      input: `${i}`,
    }));
    const position = await h.append(
      h.commitCommand('turns', testDocument(1, instances), { source: 'import' }),
    );
    const caughtUp = runner.waitForPosition(position!, [StateEventType.LifecycleOpened]);
    await new Promise((r) => setTimeout(r, 300));
    expect(applying).toEqual([]);
    await other.query('SELECT pg_advisory_unlock($1, hashtext($2))', [LOCK_NAMESPACE, names[0]]);
    other.release();
    await caughtUp;
    // Without the turns the two others apply while the first waits for its lock.
    expect(applying).toEqual(names);
  });
  it('passes over held events of no type its projector handles in one batch', async () => {
    const applied: string[][] = [];
    const spy: Projector = {
      name: 'pass-over-spy',
      handles: [StateEventType.LifecycleClosed],
      tables: [],
      apply: async (events) => void applied.push(events.map((e) => e.type)),
    };
    const runner = runnerOf(spy);
    const start = (await h.events.lastPosition())!;
    await runner.waitForPosition(start);
    applied.length = 0;
    const instances = Array.from({ length: 3_000 }, (_, i) => ({
      name: 'p',
      key: i,
      input: `${i}`,
    }));
    await h.append(h.commitCommand('pass-over', testDocument(1, instances), { source: 'import' }));
    // The next commit drops one instance: an ApplyCommitted, then a LifecycleClosed.
    await h.append(
      h.commitCommand('pass-over', testDocument(2, instances.slice(1)), { source: 'import' }),
    );
    // The log shows the commits once no older transaction is open (its horizon).
    const isClose = (e: RecordedEvent) => e.type === StateEventType.LifecycleClosed;
    const log = await wholeLog(h.events, () => h.events.readAll(start, 10_000));
    const closedAt = log.findIndex(isClose);
    expect(closedAt).toBeGreaterThan(3_000);
    // One transaction up to the event it handles (in batches of 500, seven).
    expect(await runner.runBatch(spy, 500)).toBe(closedAt);
    expect(applied).toEqual([]);
    expect(await runner.runBatch(spy, 500)).toBe(log.length - closedAt);
    expect(applied).toEqual([[StateEventType.LifecycleClosed]]);
  });
});
