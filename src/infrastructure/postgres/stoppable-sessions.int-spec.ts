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
