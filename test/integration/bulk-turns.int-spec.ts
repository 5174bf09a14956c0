import { randomUUID } from 'node:crypto';
import { AddressInfo, createServer } from 'node:net';
import { Client } from 'pg';
import { bulkDatabase } from '../../src/app/event-store.module';
import { EventFeed, FeedItem } from '../../src/application/events/event-feed';
import { EventFilter } from '../../src/application/events/event-filter';
import { PostgresEventStore } from '../../src/infrastructure/event-store/postgres-event-store';
import { Notifier } from '../../src/infrastructure/postgres/notifier';
import { createTestDatabase, TestDatabase } from '../support/test-database';

const EVENTS = 30;

describe('bulk readers waiting for their turn', () => {
  let t: TestDatabase;
  let notifier: Notifier;
  let store: PostgresEventStore;

  beforeAll(async () => {
    t = await createTestDatabase();
    notifier = new Notifier(t.url);
    store = new PostgresEventStore(t.db, notifier);
    await store.appendToStream(
      `state-turns-${randomUUID()}`,
      Array.from({ length: EVENTS }, (_, i) => ({
        eventId: randomUUID(),
        type: 'TurnEvent',
        schemaVersion: 1,
        data: { i },
        metadata: {
          actor: 'writer',
          correlationId: randomUUID(),
          causationId: null,
          occurredAt: '2026-01-01T00:00:00.000Z',
        },
      })),
      { expectedRevision: 'no_stream' },
    );
  });
  afterAll(async () => {
    await notifier.close();
    await t.drop();
  });

  /** Until `n` statements wait on a lock in this database: readers holding a connection. */
  async function blockedOnLock(n: number): Promise<void> {
    for (let i = 0; i < 600; i++) {
      // Not from the locking transaction: it sees pg_stat_activity as of its first look.
      const rows = await t.db.query<{ n: string }>(
        `SELECT count(*) AS n FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      );
      if (Number(rows[0].n) >= n) return;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error('the readers never reached the log');
  }

  it('three readers on one connection with a 200 ms connect timeout, each held far longer: all deliver everything, none errors', async () => {
    // kld's bulk pool in small: one connection, a connect timeout shorter than a reader's page.
    const bulk = bulkDatabase(t.url, { max: 1, connectionTimeoutMillis: 200 });
    const bulkStore = new PostgresEventStore(bulk, notifier, undefined, 0);
    // A feed each: one feed reads a page once for all its readers at the same
    // place (SharedPages), and these must each ask the pool.
    const feeds = Array.from(
      { length: 3 },
      () => new EventFeed(store, { catchUp: bulkStore, pageSize: 10 }),
    );
    const admin = new Client({ connectionString: t.url });
    await admin.connect();
    try {
      // Every page read waits behind this lock while it is held: the reader
      // with the connection keeps it, the others wait for their turn.
      await admin.query('BEGIN; LOCK TABLE kl_events IN ACCESS EXCLUSIVE MODE');
      const readers = feeds.map(async (feed) => {
        const items = await feed.open(
          { from: 'start', filter: EventFilter.compile(), follow: false },
          new AbortController().signal,
        );
        const got: FeedItem[] = [];
        for await (const item of items) got.push(item);
        return got.flatMap((i) => (i.kind === 'event' ? [(i.event.data as { i: number }).i] : []));
      });
      await blockedOnLock(1);
      // The pool's metrics still show who waits (kilolock_db_pool_connections{state="waiting"}).
      expect(bulk.pool.waitingCount).toBe(2);
      // Well past the connect timeout for those waiting behind the first.
      await new Promise((r) => setTimeout(r, 1000));
      await admin.query('COMMIT');
      const delivered = await Promise.allSettled(readers);
      const all = Array.from({ length: EVENTS }, (_, i) => i);
      expect(delivered).toEqual([0, 1, 2].map(() => ({ status: 'fulfilled', value: all })));
    } finally {
      await admin.end();
      for (const feed of feeds) await feed.close();
      await bulk.close();
    }
  });

  it('a database that cannot be reached still ends the readers with an error', async () => {
    // A port nothing listens on: every connect is refused.
    const closed = await new Promise<number>((resolve) => {
      const server = createServer();
      server.listen(0, '127.0.0.1', () => {
        const { port } = server.address() as AddressInfo;
        server.close(() => resolve(port));
      });
    });
    const away = new URL(t.url);
    away.port = String(closed);
    const bulk = bulkDatabase(away.toString(), { max: 1, connectionTimeoutMillis: 200 });
    const feed = new EventFeed(store, {
      catchUp: new PostgresEventStore(bulk, notifier, undefined, 0),
      pageSize: 10,
    });
    try {
      const read = Array.from({ length: 3 }, async () => {
        const items = await feed.open(
          { from: 'start', filter: EventFilter.compile(), follow: false },
          new AbortController().signal,
        );
        for await (const item of items) void item;
      });
      const ended = await Promise.allSettled(read);
      expect(ended.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
    } finally {
      await feed.close();
      await bulk.close();
    }
  });
});
