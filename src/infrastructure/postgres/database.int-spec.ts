import { TcpProxy } from '../../../test/support/tcp-proxy';
import { createTestDatabase, TestDatabase } from '../../../test/support/test-database';
import { Database } from './database';
import { isDatabaseUnavailable } from './database-unavailable';

/** The pool when PostgreSQL goes away or hangs under it. */
describe('Database when its connections are lost', () => {
  let t: TestDatabase;
  let proxy: TcpProxy;
  beforeAll(async () => {
    t = await createTestDatabase();
    const target = new URL(t.url);
    proxy = await new TcpProxy({ host: target.hostname, port: Number(target.port) }).start();
  });
  afterAll(async () => {
    await proxy.cut();
    await t.drop();
  });
  afterEach(() => proxy.restore());

  it('fails a transaction whose connection dropped between two statements, and lives on', async () => {
    const db = new Database(proxy.via(t.url));
    try {
      const failed = await db
        .transaction(async (client) => {
          await client.query('SELECT 1');
          const ended = new Promise((resolve) => client.once('end', resolve));
          await proxy.cut(); // no statement runs: node-postgres emits 'error' on the client
          await ended;
          await client.query('SELECT 2');
        })
        .then(
          () => null,
          (err: unknown) => err,
        );
      expect(isDatabaseUnavailable(failed)).toBe(true);

      await proxy.restore();
      // the broken client was dropped, not handed out again
      expect(await db.query<{ n: number }>('SELECT 3 AS n')).toEqual([{ n: 3 }]);
    } finally {
      await db.close();
    }
  });

  it("gives up opening a connection after the URL's connect_timeout", async () => {
    const url = new URL(proxy.via(t.url));
    url.searchParams.set('connect_timeout', '1');
    const db = new Database(url.toString());
    try {
      await proxy.stall();
      const failed = await db.query('SELECT 1').then(
        () => null,
        (err: unknown) => err,
      );
      expect(isDatabaseUnavailable(failed)).toBe(true);
      expect(String((failed as Error).message)).not.toContain(t.url);
    } finally {
      await db.close();
    }
  });
});

describe('Database between two commands', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase();
  });
  afterAll(() => t.drop());
  afterEach(() => jest.useRealTimers());

  it('keeps its session through a pause of a minute: the next command opens no new backend', async () => {
    // The pool's idle timer on a clock of the test's (the sockets' I/O is real).
    jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
    const db = new Database(t.url);
    try {
      const [before] = await db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      // A minute on: node-postgres's own default (10 s) has ended the session.
      jest.advanceTimersByTime(60_000);
      jest.useRealTimers();
      const [after] = await db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      expect(after.pid).toBe(before.pid);
      expect(db.pool.totalCount).toBe(1);
    } finally {
      await db.close();
    }
  });
});
