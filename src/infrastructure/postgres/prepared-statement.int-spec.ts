import { createTestDatabase, TestDatabase } from '../../../test/support/test-database';
import { Database } from './database';
import { prepared } from './prepared-statement';

describe('prepared statements', () => {
  let t: TestDatabase;
  let db: Database;
  beforeAll(async () => {
    t = await createTestDatabase();
    db = new Database(t.url, { max: 1 });
    await db.query('CREATE TABLE prepared_things (id int PRIMARY KEY, label text)');
  });
  afterAll(async () => {
    await db.close();
    await t.drop();
  });

  const insert = (id: number, label: string) =>
    prepared('INSERT INTO prepared_things (id, label) VALUES ($1, $2) RETURNING label', [
      id,
      label,
    ]);

  it('parses a text once per connection and runs it with each call’s values', async () => {
    const client = await db.pool.connect();
    try {
      const first = await client.query(insert(1, 'one'));
      const second = await client.query(insert(2, 'two'));
      expect([first.rows, second.rows]).toEqual([[{ label: 'one' }], [{ label: 'two' }]]);
      const { rows } = await client.query<{ name: string; statement: string }>(
        'SELECT name, statement FROM pg_prepared_statements',
      );
      expect(rows).toEqual([{ name: insert(0, '').name, statement: insert(0, '').text }]);
    } finally {
      client.release();
    }
  });

  it('names two texts apart, and one text alike every time', () => {
    const other = prepared('SELECT label FROM prepared_things WHERE id = $1', [1]);
    expect(other.name).not.toBe(insert(1, 'one').name);
    expect(insert(1, 'one').name).toBe(insert(2, 'two').name);
  });

  it('writes to the table its name means now, after a swap (a rebuild renames tables)', async () => {
    await db.transaction(async (tx) => {
      await tx.query('CREATE TABLE prepared_things_new (LIKE prepared_things INCLUDING ALL)');
      await tx.query('ALTER TABLE prepared_things RENAME TO prepared_things_old');
      await tx.query('ALTER TABLE prepared_things_new RENAME TO prepared_things');
    });
    // The pool's one connection prepared the INSERT before the swap.
    await db.pool.query(insert(3, 'three'));
    expect(await db.query('SELECT id, label FROM prepared_things')).toEqual([
      { id: 3, label: 'three' },
    ]);
    expect(await db.query('SELECT count(*)::int AS n FROM prepared_things_old')).toEqual([
      { n: 2 },
    ]);
  });
});
