import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { describeEventStoreConformance } from '../../../test/conformance/event-store.conformance';
import { createTestDatabase, TestDatabase } from '../../../test/support/test-database';
import { LOG_START } from '../../domain/shared/event';
import { Notifier } from '../postgres/notifier';
import { PostgresEventStore } from './postgres-event-store';

describeEventStoreConformance('PostgreSQL', async () => {
  const t = await createTestDatabase();
  const notifier = new Notifier(t.url);
  return {
    store: new PostgresEventStore(t.db, notifier),
    close: async () => {
      await notifier.close();
      await t.drop();
    },
  };
});

describe('PostgreSQL event store: late commits', () => {
  let t: TestDatabase;
  let notifier: Notifier;
  beforeAll(async () => {
    t = await createTestDatabase();
    notifier = new Notifier(t.url);
  });
  afterAll(async () => {
    await notifier.close();
    await t.drop();
  });

  it('does not let a reader pass an event whose transaction took its position early and commits late', async () => {
    const store = new PostgresEventStore(t.db, notifier);
    const slow = new Client({ connectionString: t.url });
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
      await store.appendToStream(
        'fast',
        [
          {
            eventId: randomUUID(),
            type: 'Early',
            schemaVersion: 1,
            data: {},
            metadata: {
              actor: 'a',
              correlationId: 'c',
              causationId: null,
              occurredAt: '2026-01-01T00:00:00Z',
            },
          },
        ],
        { expectedRevision: 'no_stream' },
      );

      // A position-only reader would now see 'Early' and move past 'Late'.
      expect(await store.readAll(LOG_START, 100)).toEqual([]);

      await slow.query('COMMIT');
      // Visible once no older transaction is open anywhere on the server
      // (other test files may hold one for a moment).
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
});
