import { randomUUID } from 'node:crypto';
import { Notifier } from '../../src/infrastructure/postgres/notifier';
import { PostgresEventStore } from '../../src/infrastructure/event-store/postgres-event-store';
import { RecordedEvent } from '../../src/domain/shared/event';
import { ProjectionRunner } from '../../src/projections/projection-runner';
import type { Projector } from '../../src/projections/projector';
import { lockInfo, StateHarness } from '../support/state-harness';

/**
 * A server at rest: its projectors' loops do not each look at the log on
 * their own (a dozen transactions every quarter of a second), yet an event
 * whose append signal never arrives is still projected within moments.
 */
describe('projector loops at rest', () => {
  let h: StateHarness;
  let runner: ProjectionRunner;
  const pinged: RecordedEvent[] = [];
  const pings: Projector = {
    name: 'pings',
    handles: ['Pinged'],
    tables: [],
    apply: (events) => {
      pinged.push(...events);
      return Promise.resolve();
    },
  };

  beforeAll(async () => {
    h = await StateHarness.create();
    runner = h.newRunner([...h.projectors, pings]);
    runner.start();
    // Something in the log, every read model caught up with it.
    const locked = await h.append({
      type: 'LockState',
      data: { name: 'rest', newStateId: h.newStateId(), lockInfo: lockInfo('R-1') },
      metadata: h.context(),
    });
    await runner.waitForPosition(locked!, ['StateCreated', 'LockAcquired']);
  });

  afterAll(async () => {
    await runner.stop();
    await h.close();
  });

  it('ask the database less than once a second per projector while the log is still', async () => {
    const projectors = runner.names().length;
    expect(projectors).toBeGreaterThan(4);
    // The appends' deferred checkpoints settle first.
    for (const deadline = Date.now() + 10_000; Date.now() < deadline;) {
      if (await runner.caughtUp()) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    await new Promise((r) => setTimeout(r, 1_000));
    const pool = h.db.pool;
    const connect = pool.connect.bind(pool);
    let asked = 0;
    pool.connect = ((...args: Parameters<typeof pool.connect>) => {
      asked++;
      return connect(...args);
    }) as typeof pool.connect;
    const started = Date.now();
    try {
      await new Promise((r) => setTimeout(r, 2_000));
    } finally {
      pool.connect = connect;
    }
    const seconds = (Date.now() - started) / 1000;
    expect(asked).toBeGreaterThan(0); // the one look at the log's head
    expect(asked).toBeLessThan(projectors * seconds);
  });

  it('projects an event whose append signal was lost', async () => {
    // Another process's append, its NOTIFY never received: a store whose notifier is closed.
    const silent = new Notifier(h.t.url);
    await silent.close();
    const elsewhere = new PostgresEventStore(h.db, silent);
    await elsewhere.appendToStream(
      'ping-1',
      [
        {
          eventId: randomUUID(),
          type: 'Pinged',
          schemaVersion: 1,
          data: { n: 1 },
          metadata: {
            actor: 'elsewhere',
            correlationId: randomUUID(),
            causationId: null,
            occurredAt: '2026-01-01T00:00:00.000Z',
          },
        },
      ],
      { expectedRevision: 'no_stream' },
    );
    for (const deadline = Date.now() + 5_000; Date.now() < deadline;) {
      if (pinged.length > 0) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    expect(pinged.map((e) => e.data)).toEqual([{ n: 1 }]);
  });
});
