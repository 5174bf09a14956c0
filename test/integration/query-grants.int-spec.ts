import { randomUUID } from 'node:crypto';
import { EVERYTHING, SqlQueryService } from '../../src/infrastructure/query/sql-query.service';
import { createTestDatabase, quietLogger, TestDatabase } from '../support/test-database';

/**
 * What a query may see is a row of kl_query_grants under its reader
 * connection's pid, written before the statement and deleted after it. A
 * connection taken by the next query gets that query's row; the previous
 * query's delete must not take it away.
 */
describe('query grants on a reused reader connection', () => {
  let t: TestDatabase;
  let service: SqlQueryService;
  /**
   * While set, the next revoke first starts `next`, lets its grant be
   * written, then deletes; and that grant's answer waits for the delete.
   */
  let interleave: { next: () => Promise<unknown>; started?: Promise<unknown> } | null = null;

  beforeAll(async () => {
    t = await createTestDatabase('kl_query_grants');
    await t.db.query(
      `INSERT INTO states (state_id, name, created_at, updated_at) VALUES ($1, 'one', now(), now())`,
      [randomUUID()],
    );
    const query = t.db.query.bind(t.db);
    let granted: (() => void) | null = null;
    let revoked: Promise<void> | null = null;
    (t.db as { query: unknown }).query = async (sql: string, params?: unknown[]) => {
      if (sql.startsWith('DELETE FROM kl_query_grants') && interleave && !interleave.started) {
        let done!: () => void;
        revoked = new Promise<void>((resolve) => (done = resolve));
        const written = new Promise<void>((resolve) => (granted = resolve));
        interleave.started = interleave.next();
        await written;
        try {
          return await query(sql, params);
        } finally {
          done();
        }
      }
      const rows = await query(sql, params);
      if (sql.startsWith('INSERT INTO kl_query_grants') && granted) {
        const g = granted;
        granted = null;
        g();
        await revoked;
      }
      return rows;
    };
    service = new SqlQueryService(t.db, quietLogger);
    await service.start();
  });

  afterAll(async () => {
    await service?.close();
    await t?.drop();
  });

  const run = () =>
    service.run(
      { sql: 'SELECT name FROM states', params: [], maxRows: 10, timeoutMs: 10_000 },
      EVERYTHING,
    );

  it("keeps the next query's grant when the previous query's revoke lands after it", async () => {
    // The second query starts as the first one's revoke is sent, and runs
    // its statement only once that revoke has been made.
    interleave = { next: run };
    expect((await run()).rows).toEqual([['one']]);
    expect(interleave.started).toBeDefined();
    expect(await interleave.started).toMatchObject({ rows: [['one']] });
    interleave = null;
    // and each query's row is gone after it
    expect(await t.db.query('SELECT pid FROM kl_query_grants')).toEqual([]);
  });

  it('names the columns and their types on every query, built-in or not', async () => {
    const sql = `SELECT 1::int8 AS a, 'x'::text AS b, '{}'::jsonb AS c, 'one'::name AS d`;
    for (let i = 0; i < 2; i++) {
      const result = await service.run(
        { sql, params: [], maxRows: 10, timeoutMs: 10_000 },
        EVERYTHING,
      );
      expect(result.columns).toEqual([
        { name: 'a', type: 'bigint' },
        { name: 'b', type: 'text' },
        { name: 'c', type: 'jsonb' },
        { name: 'd', type: 'name' },
      ]);
    }
  });
});
