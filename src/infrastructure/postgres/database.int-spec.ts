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
