import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { describeEventStoreConformance } from '../../../test/conformance/event-store.conformance';
import {
  openEventStoreDatabase,
  useEventStoreDatabase,
} from '../../../test/support/event-store-database';
import { createEmptyDatabase } from '../../../test/support/test-database';
import { LOG_START } from '../../domain/shared/event';
import { PostgresEventStore } from './postgres-event-store';

describeEventStoreConformance('PostgreSQL', async () => {
  const { t, notifier, close } = await openEventStoreDatabase();
  return { store: new PostgresEventStore(t.db, notifier), close };
});

describe('PostgreSQL event store: late commits', () => {
  const env = useEventStoreDatabase();

  it('does not let a reader pass an event whose transaction took its position early and commits late', async () => {
    const store = new PostgresEventStore(env.t.db, env.notifier);
    const slow = new Client({ connectionString: env.t.url });
    await slow.connect();
    try {
      // The slow writer takes its transaction id and global position first...
      await slow.query('BEGIN');
      await slow.query(
        `INSERT INTO kl_events (event_id, stream_id, stream_revision, type, schema_version,
                                data, metadata)
         VALUES (gen_random_uuid(), 'slow', 0, 'Late', 1, '{}', '{}')`,
      );
      // ...a fast writer commits after it, with a later position.
      await store.appendToStream('fast', [event('Early')], { expectedRevision: 'no_stream' });

      // A position-only reader would now see 'Early' and move past 'Late'.
      expect(await store.readAll(LOG_START, 100)).toEqual([]);

      await slow.query('COMMIT');
      // Visible once no older transaction of this database is open (the
      // store's own projector-free test has none, but keep it bounded).
      let all = await store.readAll(LOG_START, 100);
      for (const deadline = Date.now() + 15_000; !all.length && Date.now() < deadline;) {
        await new Promise((r) => setTimeout(r, 50));
        all = await store.readAll(LOG_START, 100);
      }
      expect(all.map((e) => e.type)).toEqual(['Late', 'Early']);
    } finally {
      await slow.end();
    }
  });

  it('does not wait for a transaction held open in another database of the same server', async () => {
    const store = new PostgresEventStore(env.t.db, env.notifier);
    const other = await createEmptyDatabase();
    const elsewhere = new Client({ connectionString: other.url });
    await elsewhere.connect();
    try {
      // An application sharing the server holds a transaction with an id.
      await elsewhere.query('BEGIN');
      await elsewhere.query('SELECT pg_current_xact_id()');
      const before = (await store.readAll(LOG_START, 10_000)).length;
      await store.appendToStream(randomUUID(), [event('WhileOtherDatabaseBusy')], {
        expectedRevision: 'no_stream',
      });
      // A transaction of another database that ends between the horizon's
      // snapshot and its look at the server's activity counts as this
      // database's for that one read (kl_log_horizon); other test files
      // commit all the time. The one held open here never ends meanwhile,
      // so a horizon that waited for it would show nothing however long.
      let after = await store.readAll(LOG_START, 10_000);
      for (let i = 0; i < 100 && after.length === before; i++) {
        await new Promise((r) => setTimeout(r, 50));
        after = await store.readAll(LOG_START, 10_000);
      }
      expect(after.length).toBe(before + 1);
      expect(after[after.length - 1].type).toBe('WhileOtherDatabaseBusy');
    } finally {
      await elsewhere.query('ROLLBACK').catch(() => null);
      await elsewhere.end();
      await other.drop();
    }
  });

  it('waits for a transaction of its own database that could still append, and for its own appends', async () => {
    const store = new PostgresEventStore(env.t.db, env.notifier);
    const held = new Client({ connectionString: env.t.url });
    await held.connect();
    try {
      const before = (await store.readAll(LOG_START, 10_000)).length;
      // It has an id but has appended nothing yet: it could still append
      // with a key below the next event's.
      await held.query('BEGIN');
      await held.query('SELECT pg_current_xact_id()');
      await store.appendToStream(randomUUID(), [event('AfterHeld')], {
        expectedRevision: 'no_stream',
      });
      expect(await store.readAll(LOG_START, 10_000)).toHaveLength(before);

      // Its own uncommitted append sits above its own horizon, also once a
      // later transaction has committed.
      await held.query(
        `INSERT INTO kl_events (event_id, stream_id, stream_revision, type, schema_version,
                                data, metadata)
         VALUES (gen_random_uuid(), $1, 0, 'Held', 1, '{}', '{}')`,
        [randomUUID()],
      );
      await store.appendToStream(randomUUID(), [event('AfterHeldAppend')], {
        expectedRevision: 'no_stream',
      });
      const { rows } = await held.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM kl_events
          WHERE type = 'Held' AND transaction_id < (SELECT kl_log_horizon())`,
      );
      expect(rows[0].n).toBe(0);

      await held.query('COMMIT');
      const all = await store.readAll(LOG_START, 10_000);
      expect(all.slice(before).map((e) => e.type)).toEqual([
        'Held',
        'AfterHeld',
        'AfterHeldAppend',
      ]);
    } finally {
      await held.end();
    }
  });
});

function event(type: string) {
  return {
    eventId: randomUUID(),
    type,
    schemaVersion: 1,
    data: {},
    metadata: {
      actor: 'a',
      correlationId: 'c',
      causationId: null,
      occurredAt: '2026-01-01T00:00:00Z',
    },
  };
}
