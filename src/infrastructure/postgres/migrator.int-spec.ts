import {
  createEmptyDatabase,
  createTestDatabase,
  quietLogger,
  TestDatabase,
} from '../../../test/support/test-database';
import { loadMigrations, migrate, migrationsCurrent } from './migrator';

describe('migrations', () => {
  let t: TestDatabase;
  beforeAll(async () => (t = await createTestDatabase()));
  afterAll(async () => t.drop());

  it('records every migration once with its checksum, and a second run applies nothing', async () => {
    const rows = await t.db.query<{ id: number; checksum: string }>(
      'SELECT id, checksum FROM kl_migrations ORDER BY id',
    );
    expect(rows).toEqual(loadMigrations().map((m) => ({ id: m.id, checksum: m.checksum })));
    expect(await migrate(t.url, quietLogger)).toEqual({ applied: [] });
    expect(await migrationsCurrent((sql) => t.db.query(sql))).toBe(true);
  });

  it('lets concurrent starts race: each migration is applied exactly once', async () => {
    const empty = await createEmptyDatabase();
    try {
      const results = await Promise.all(
        Array.from({ length: 4 }, () => migrate(empty.url, quietLogger)),
      );
      const applied = results.flatMap((r) => r.applied).sort();
      expect(applied).toEqual(
        loadMigrations()
          .map((m) => m.name)
          .sort(),
      );
    } finally {
      await empty.drop();
    }
  });

  it('refuses an applied migration whose file changed, and applies nothing', async () => {
    const edited = loadMigrations().map((m, i) =>
      i === 0 ? { ...m, sql: m.sql + '\n-- edit', checksum: 'different' } : m,
    );
    await expect(migrate(t.url, quietLogger, edited)).rejects.toThrow(
      /migration 001_event_store\.sql was edited after it was applied/,
    );
  });

  it('a failing migration leaves no trace and names itself', async () => {
    const broken = [
      ...loadMigrations(),
      {
        id: 999,
        name: '999_broken.sql',
        sql: 'CREATE TABLE kl_ok (x int); SELECT nope;',
        checksum: 'x',
      },
    ];
    await expect(migrate(t.url, quietLogger, broken)).rejects.toThrow(
      /migration 999_broken\.sql failed/,
    );
    const rows = await t.db.query(`SELECT to_regclass('kl_ok') AS t`);
    expect(rows[0].t).toBeNull();
    expect(await t.db.query('SELECT 1 FROM kl_migrations WHERE id = 999')).toHaveLength(0);
  });
});
