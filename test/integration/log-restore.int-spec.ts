import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { EventFeed, FeedItem } from '../../src/application/events/event-feed';
import { EventFilter } from '../../src/application/events/event-filter';
import { KldServer, startServer } from '../../src/app/server';
import { DomainError } from '../../src/domain/shared/domain-error';
import { epochOf, formatCursor, parseCursor } from '../../src/domain/shared/log-cursor';
import { loadConfig } from '../../src/infrastructure/config/config';
import { Notifier } from '../../src/infrastructure/postgres/notifier';
import { PostgresEventStore } from '../../src/infrastructure/event-store/postgres-event-store';
import { Database } from '../../src/infrastructure/postgres/database';
import {
  advanceTransactionIds,
  Dump,
  dumpDatabase,
  nextTransactionId,
  restoreDatabase,
  SecondCluster,
  startSecondCluster,
} from '../support/restore';
import { createTestDatabase, quietLogger, TestDatabase } from '../support/test-database';

const doc = (serial: number) =>
  JSON.stringify({
    version: 4,
    terraform_version: '1.11.4',
    serial,
    lineage: 'restored',
    outputs: { serial: { value: serial, type: 'number' } },
    resources: [],
  });

async function withServer<T>(url: string, fn: (server: KldServer) => Promise<T>): Promise<T> {
  const server = await startServer(
    loadConfig({ KL_DATABASE_URL: url, KL_LISTEN: '127.0.0.1:0', KL_GRPC_LISTEN: 'off' }),
    quietLogger,
  );
  try {
    return await fn(server);
  } finally {
    await server.close();
  }
}

async function commit(server: KldServer, name: string, serial: number): Promise<void> {
  const res = await fetch(`${server.url}/v1/states/${name}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: doc(serial),
  });
  expect(res.status).toBe(200);
}

async function served(server: KldServer, name: string): Promise<number> {
  const res = await fetch(`${server.url}/v1/states/${name}`);
  return ((await res.json()) as { serial: number }).serial;
}

/** Every event of the log at `url` after `from`, as a consumer reads it. */
async function readFeed(url: string, from: string | 'start'): Promise<FeedItem[]> {
  const db = new Database(url);
  const notifier = new Notifier(url);
  try {
    const feed = new EventFeed(new PostgresEventStore(db, notifier));
    const items: FeedItem[] = [];
    const it = await feed.open(
      {
        from: from === 'start' ? 'start' : parseCursor(from),
        filter: EventFilter.compile(),
        follow: false,
      },
      new AbortController().signal,
    );
    for await (const item of it) items.push(item);
    return items;
  } finally {
    await notifier.close();
    await db.close();
  }
}

const cursors = (items: FeedItem[]) =>
  items.flatMap((i) => (i.kind === 'event' ? [formatCursor(i.event.position)] : []));

async function listed(url: string): Promise<string[]> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    const { rows } = await c.query<{ cursor: string }>(
      'SELECT cursor FROM event_log ORDER BY cursor',
    );
    return rows.map((r) => r.cursor);
  } finally {
    await c.end();
  }
}

async function epochs(url: string): Promise<number[]> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    const { rows } = await c.query<{ epoch: number }>('SELECT epoch FROM kl_log_epochs ORDER BY 1');
    return rows.map((r) => r.epoch);
  } finally {
    await c.end();
  }
}

describe('a log restored from a dump', () => {
  let source: TestDatabase;
  let second: SecondCluster;
  let dump: Dump;
  let savedCursor: string;
  let before: string[];
  const restored: string[] = [];

  beforeAll(async () => {
    source = await createTestDatabase();
    second = await startSecondCluster();
    // The source cluster has run far ahead of a fresh one.
    await advanceTransactionIds(source.url, (await nextTransactionId(second.url)) + 5000n);
    await withServer(source.url, async (server) => {
      for (let serial = 1; serial <= 4; serial++) await commit(server, 'team/net', serial);
    });
    before = await listed(source.url);
    savedCursor = before[2]; // a consumer had read three events
    dump = await dumpDatabase(source.url);
  });
  afterAll(async () => {
    for (const name of restored) {
      const admin = new Client({ connectionString: process.env.KL_TEST_DATABASE_URL });
      await admin.connect();
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    }
    await source.drop();
    await second.stop();
  });

  it('into a cluster whose transaction ids are behind it: a new epoch, after every stored event', async () => {
    const url = await restoreDatabase(dump, second.url, 'kilolock');
    expect(await nextTransactionId(url)).toBeLessThan(parseCursor(before.at(-1)!).transactionId);
    expect(await epochs(url)).toEqual([0, 1]);
    await withServer(url, async (server) => {
      expect(await served(server, 'team/net')).toBe(4);
      // Without the epoch the read models would pass over this commit (and
      // the write would answer 503): its transaction id is below the others.
      await commit(server, 'team/net', 5);
      expect(await served(server, 'team/net')).toBe(5);
      const history = await fetch(`${server.url}/v1/api/states/team/net/history`);
      expect(
        ((await history.json()) as { versions: { serial: number }[] }).versions.map(
          (v) => v.serial,
        ),
      ).toEqual([1, 2, 3, 4, 5]);
    });
    const after = await listed(url);
    expect(after.slice(0, before.length)).toEqual(before);
    expect(after.slice(before.length).map((c) => epochOf(parseCursor(c)))).toEqual([1]);
    // A consumer resumes from the cursor it saved before the dump: exactly the rest.
    expect(cursors(await readFeed(url, savedCursor))).toEqual(after.slice(3));
    expect(cursors(await readFeed(url, 'start'))).toEqual(after);
  });

  it('into another database of the same cluster: ids are ahead, the epoch stays', async () => {
    const name = `kl_restored_${randomBytes(4).toString('hex')}`;
    restored.push(name);
    const url = await restoreDatabase(dump, process.env.KL_TEST_DATABASE_URL!, name);
    expect(await epochs(url)).toEqual([0]);
    await withServer(url, async (server) => {
      await commit(server, 'team/net', 5);
      expect(await served(server, 'team/net')).toBe(5);
    });
    expect(cursors(await readFeed(url, savedCursor))).toEqual((await listed(url)).slice(3));
  });

  it('refuses a cursor from events the restored backup does not have', async () => {
    // The source goes on after the dump; a consumer reads its newest event...
    await withServer(source.url, (server) => commit(server, 'team/net', 5));
    const lost = (await listed(source.url)).at(-1)!;
    // ...then the database is restored from the older dump and written to.
    const name = `kl_restored_${randomBytes(4).toString('hex')}`;
    restored.push(name);
    const url = await restoreDatabase(dump, process.env.KL_TEST_DATABASE_URL!, name);
    await withServer(url, (server) => commit(server, 'team/net', 5));
    const err = await readFeed(url, lost).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DomainError);
    expect((err as DomainError).code).toBe('EVENTS.INVALID_POSITION');
    expect((err as DomainError).message).toContain(`position ${lost} is not in this log`);
  });
});
