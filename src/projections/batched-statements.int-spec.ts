import type { PoolClient } from 'pg';
import { createTestDatabase, TestDatabase } from '../../test/support/test-database';
import { Database, type Queryable } from '../infrastructure/postgres/database';
import { batchedStatements } from './batched-statements';

describe('statements of projectors sharing a transaction, sent together', () => {
  let t: TestDatabase;
  let db: Database;
  beforeAll(async () => {
    t = await createTestDatabase();
    db = new Database(t.url, { max: 1 });
    await db.query(
      'CREATE TABLE batched_things (owner text, n bigint, label text, tags text[], doc jsonb, bytes bytea, UNIQUE (owner, n))',
    );
  });
  afterAll(async () => {
    await db.close();
    await t.drop();
  });

  /** Runs `sharers` on one transaction's shared connection; the round trips it took, and its outcome. */
  async function share(...sharers: ((q: Queryable) => Promise<void>)[]) {
    const trips: string[] = [];
    const outcome = await db
      .transaction(async (tx: PoolClient) => {
        const query = tx.query.bind(tx) as (...a: unknown[]) => Promise<unknown>;
        (tx as unknown as { query: unknown }).query = (...a: unknown[]) => {
          trips.push(typeof a[0] === 'string' ? a[0] : String((a[0] as { text: string }).text));
          return query(...a);
        };
        try {
          const shared = batchedStatements(tx, sharers.length);
          const settled = await Promise.allSettled(
            sharers.map((s) => shared.applying(s(shared.queryable))),
          );
          const failed = settled.find((s) => s.status === 'rejected');
          if (failed) throw (failed as PromiseRejectedResult).reason;
        } finally {
          (tx as unknown as { query: unknown }).query = query;
        }
      })
      .then(
        () => 'committed',
        (err: Error) => err.message,
      );
    return { trips, outcome };
  }

  const awkward = {
    label: `it's a "quote", a back\\slash, a $1 and a ; too`,
    tags: ['a,b', 'c"d', null, 'e\\f'],
    doc: { nested: { text: "o'clock", n: 1.5 } },
  };

  it('sends what every sharer asks for at once in one round trip, and answers each its own', async () => {
    const seen: Record<string, unknown> = {};
    const sharer = (owner: string) => async (q: Queryable) => {
      await q.query(
        'INSERT INTO batched_things (owner, n, label, tags, doc) VALUES ($1, $2, $3, $4, $5)',
        [owner, 9007199254740993n, awkward.label, awkward.tags, awkward.doc],
      );
      const { rows } = await q.query(
        'SELECT owner, n::text, label, tags, doc FROM batched_things WHERE owner = $1',
        [owner],
      );
      seen[owner] = rows;
    };
    const { trips, outcome } = await share(sharer('a'), sharer('b'), sharer('c'));
    expect(outcome).toBe('committed');
    // Three sharers, two statements each: two round trips.
    expect(trips).toHaveLength(2);
    for (const owner of ['a', 'b', 'c']) {
      expect(seen[owner]).toEqual([{ owner, n: '9007199254740993', ...awkward }]);
    }
  });

  it('sends a statement with bytes alone, with its parameters, and the others together', async () => {
    const bytes = Buffer.from([0, 1, 2, 0xfe, 0xff, 0x27, 0x5c]);
    const { trips, outcome } = await share(
      (q) =>
        q
          .query('INSERT INTO batched_things (owner, n, bytes) VALUES ($1, 1, $2)', [
            'bytes',
            bytes,
          ])
          .then(() => undefined),
      (q) => q.query("INSERT INTO batched_things (owner, n) VALUES ('x', 1)").then(() => undefined),
      (q) => q.query("INSERT INTO batched_things (owner, n) VALUES ('y', 1)").then(() => undefined),
    );
    expect(outcome).toBe('committed');
    expect(trips).toHaveLength(2);
    expect(trips.filter((t) => t.includes('$2'))).toHaveLength(1);
    const [row] = await db.query<{ bytes: Buffer }>(
      "SELECT bytes FROM batched_things WHERE owner = 'bytes'",
    );
    expect(row.bytes.equals(bytes)).toBe(true);
  });

  it('fails every caller of a string in which one statement failed, and keeps nothing', async () => {
    const results: string[] = [];
    const sharer = (owner: string, n: bigint) => async (q: Queryable) => {
      try {
        await q.query('INSERT INTO batched_things (owner, n) VALUES ($1, $2)', [owner, n]);
        results.push(`${owner} written`);
      } catch (err) {
        results.push(`${owner} refused`);
        throw err;
      }
    };
    // ('a', 9007199254740993) is there since the first case.
    const { trips, outcome } = await share(sharer('fresh', 1n), sharer('a', 9007199254740993n));
    expect(trips).toHaveLength(1);
    expect(outcome).toMatch(/duplicate key/);
    expect(results.sort()).toEqual(['a refused', 'fresh refused']);
    expect(await db.query("SELECT 1 FROM batched_things WHERE owner = 'fresh'")).toEqual([]);
  });
});
