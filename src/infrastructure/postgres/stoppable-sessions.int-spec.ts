import * as fs from 'node:fs';
import { createTestDatabase, TestDatabase } from '../../../test/support/test-database';
import { Database } from './database';
import { SessionsStoppedError, StoppableSessions } from './stoppable-sessions';
import { ownConnection } from './unlogged-read-models';

/** Transactions a stop cuts short: what they wrote rolls back, and nothing else is hit. */
describe('StoppableSessions', () => {
  let t: TestDatabase;
  let db: Database;
  beforeAll(async () => {
    t = await createTestDatabase();
    db = new Database(t.url);
    await db.query('CREATE TABLE stop_probe (n int)');
  });
  afterAll(async () => {
    await db.close();
    await t.drop();
  });
  beforeEach(() => db.query('TRUNCATE stop_probe'));

  const rows = async () =>
    (await db.query<{ n: number }>('SELECT n FROM stop_probe ORDER BY n')).map((r) => r.n);
  const failure = (work: Promise<unknown>) =>
    work.then(
      () => null,
      (err: unknown) => err as { code?: string },
    );
  /** `pid` is a PostgreSQL backend of this machine serving this test's database. */
  const ourBackend = (pid: number) => {
    try {
      const title = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      return (
        title.startsWith('postgres') && title.includes(` ${new URL(t.url).pathname.slice(1)} `)
      );
    } catch {
      return false;
    }
  };
  /** What `work` settled with, or 'still running' after `ms`. */
  const settledWithin = (work: Promise<unknown>, ms: number) => {
    let timer: NodeJS.Timeout | undefined;
    return Promise.race([
      work.then((value) => ({ value })),
      new Promise((r) => (timer = setTimeout(() => r('still running'), ms))),
    ]).finally(() => clearTimeout(timer));
  };

  it('cancels the statement a transaction runs, which rolls back what it wrote', async () => {
    const sessions = new StoppableSessions(() => ownConnection(t.url));
    let sleeping!: () => void;
    const asleep = new Promise<void>((resolve) => (sleeping = resolve));
    const work = failure(
      db.transaction(
        async (tx) => {
          await tx.query('INSERT INTO stop_probe VALUES (1)');
          const sleep = tx.query('SELECT pg_sleep(120)');
          sleeping();
          await sleep;
        },
        undefined,
        sessions,
      ),
    );
    await asleep;
    // the sleep is on its way: wait until PostgreSQL runs it
    for (let i = 0; i < 100; i++) {
      const [{ n }] = await db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE query = 'SELECT pg_sleep(120)' AND state = 'active'`,
      );
      if (n === 1) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(await sessions.stop()).toBe(1);
    expect((await work)?.code).toBe('57014'); // query_canceled, long before the 120 s
    expect(await rows()).toEqual([]);
  });

  it('cancels a statement its backend had not begun to read when the first cancel came', async () => {
    // PostgreSQL drops a cancel that finds its backend reading the next command: on a
    // loaded machine, a statement sent just before the stop is still unread when its
    // cancel arrives, and ran whole (a batch waiting on a lock, as long as the lock is held).
    // A backend held still (SIGSTOP) through the send and the cancel makes that moment.
    // Only a backend of this machine (the embedded server), named so by its process title.
    const [{ probe }] = await db.query<{ probe: number }>('SELECT pg_backend_pid() AS probe');
    if (!ourBackend(probe)) return; // KL_TEST_DATABASE_URL elsewhere: cannot be held still from here
    const sessions = new StoppableSessions(() => ownConnection(t.url));
    let pid = 0;
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    let go!: () => void;
    const sent = new Promise<void>((resolve) => (go = resolve));
    const work = failure(
      db.transaction(
        async (tx) => {
          await tx.query('INSERT INTO stop_probe VALUES (1)');
          pid = (tx as unknown as { processID: number }).processID;
          entered();
          await sent;
          await tx.query('SELECT pg_sleep(120)');
        },
        undefined,
        sessions,
      ),
    );
    await inside;
    if (!ourBackend(pid)) throw new Error(`backend ${pid} is not this database's`);
    process.kill(pid, 'SIGSTOP');
    let stopped: number;
    try {
      go();
      // The sleep is on its way (written to the socket) before the stop.
      await new Promise((r) => setImmediate(r));
      stopped = await sessions.stop();
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    try {
      expect(stopped).toBe(1);
      expect(await settledWithin(work, 10_000)).toEqual({
        value: expect.objectContaining({ code: '57014' }),
      });
      expect(await rows()).toEqual([]);
    } finally {
      // Not left sleeping for the tests after this one.
      if ((await settledWithin(work, 0)) === 'still running') {
        const c = await ownConnection(t.url);
        await c.query('SELECT pg_cancel_backend($1)', [pid]);
        await c.end();
      }
      await work;
    }
  });

  it('refuses the statements a transaction had not sent yet, which rolls back', async () => {
    const sessions = new StoppableSessions(() => ownConnection(t.url));
    let inserted!: () => void;
    let proceed!: () => void;
    const wrote = new Promise<void>((resolve) => (inserted = resolve));
    const stopped = new Promise<void>((resolve) => (proceed = resolve));
    const work = failure(
      db.transaction(
        async (tx) => {
          await tx.query('INSERT INTO stop_probe VALUES (1)');
          inserted();
          await stopped; // the batch preparing its next statement
          await tx.query('INSERT INTO stop_probe VALUES (2)');
        },
        undefined,
        sessions,
      ),
    );
    await wrote;
    expect(await sessions.stop()).toBe(1);
    proceed();
    expect(await work).toBeInstanceOf(SessionsStoppedError);
    expect(await rows()).toEqual([]);
    // Its connection went back to the pool out of the transaction, and no
    // cancel is left to hit the next statement.
    for (let i = 0; i < 3; i++) {
      await db.transaction(async (tx) => {
        await tx.query('INSERT INTO stop_probe VALUES (3)');
        await tx.query('SELECT pg_sleep(0.05)');
      });
    }
    expect(await rows()).toEqual([3, 3, 3]);
  });

  it('once stopped, starts no transaction; work without it goes on', async () => {
    const sessions = new StoppableSessions(() => ownConnection(t.url));
    expect(await sessions.stop()).toBe(0);
    const refused = failure(
      db.transaction((tx) => tx.query('INSERT INTO stop_probe VALUES (1)'), undefined, sessions),
    );
    expect(await refused).toBeInstanceOf(SessionsStoppedError);
    await db.transaction((tx) => tx.query('INSERT INTO stop_probe VALUES (2)'));
    expect(await rows()).toEqual([2]);
  });
});
