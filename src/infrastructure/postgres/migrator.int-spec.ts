import {
  createEmptyDatabase,
  createTestDatabase,
  quietLogger,
  TestDatabase,
} from '../../../test/support/test-database';
import { Client } from 'pg';
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

  describe('a table in use by a long reader (a kl query on another replica)', () => {
    const alter = {
      id: 998,
      name: '998_alter_probe.sql',
      sql: 'ALTER TABLE kl_probe ADD COLUMN y int',
      checksum: 'p',
    };
    let reader: Client;
    beforeEach(async () => {
      await t.db.query('DROP TABLE IF EXISTS kl_probe; DELETE FROM kl_migrations WHERE id = 998');
      await t.db.query('CREATE TABLE kl_probe (x int)');
      reader = new Client({ connectionString: t.url });
      await reader.connect();
      await reader.query('BEGIN');
      await reader.query('SELECT * FROM kl_probe');
    });
    const migrationWaits = async () =>
      (
        await t.db.query(
          `SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
            WHERE c.relname = 'kl_probe' AND l.mode = 'AccessExclusiveLock'`,
        )
      ).length > 0;
    afterEach(async () => {
      await reader.end();
      await t.db.query('DROP TABLE IF EXISTS kl_probe; DELETE FROM kl_migrations WHERE id = 998');
    });

    it('gives way to the writers queued behind its lock, and applies once the reader is gone', async () => {
      const migrating = migrate(t.url, quietLogger, [...loadMigrations(), alter], {
        attemptMs: 200,
        giveUpAfterMs: 120_000,
      });
      // Once the migration waits for the table's lock (bounded poll), a
      // commit's write to that table: with the migration's lock request
      // queued for good, it would wait behind it until the reader ended.
      for (let i = 0; i < 500 && !(await migrationWaits()); i++) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      expect(await migrationWaits()).toBe(true);
      const writer = new Client({ connectionString: t.url });
      await writer.connect();
      try {
        await writer.query("SET lock_timeout = '20s'");
        await writer.query('INSERT INTO kl_probe VALUES (1)');
      } finally {
        await writer.end();
      }
      await reader.query('COMMIT');
      await expect(migrating).resolves.toEqual({ applied: ['998_alter_probe.sql'] });
      await expect(t.db.query('SELECT x, y FROM kl_probe')).resolves.toEqual([{ x: 1, y: null }]);
    });

    it('gives up in the end, naming what to do, and applies nothing', async () => {
      await expect(
        migrate(t.url, quietLogger, [...loadMigrations(), alter], {
          attemptMs: 100,
          giveUpAfterMs: 300,
        }),
      ).rejects.toThrow(
        /migration 998_alter_probe\.sql could not lock what it changes in \d+ s \(\d+ tries\): a session holds it/,
      );
      expect(await t.db.query('SELECT 1 FROM kl_migrations WHERE id = 998')).toHaveLength(0);
    });
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

  it('gives events stored before event ids a generated id and version 1, then requires both', async () => {
    const empty = await createEmptyDatabase();
    try {
      const all = loadMigrations();
      await migrate(
        empty.url,
        quietLogger,
        all.filter((m) => m.id < 9),
      );
      await empty.db.query(
        `INSERT INTO kl_events (stream_id, stream_revision, type, data, metadata)
         SELECT 'old', n, 'Old', '{}', '{}' FROM generate_series(0, 2) n`,
      );
      await migrate(empty.url, quietLogger, all);
      const rows = await empty.db.query<{ event_id: string; schema_version: number }>(
        `SELECT event_id, schema_version FROM event_log ORDER BY position`,
      );
      expect(rows).toHaveLength(3);
      expect(new Set(rows.map((r) => r.event_id)).size).toBe(3);
      for (const r of rows) {
        expect(r.event_id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-/);
        expect(r.schema_version).toBe(1);
      }
      // New rows must say: no default fills either column in.
      await expect(
        empty.db.query(
          `INSERT INTO kl_events (stream_id, stream_revision, type, data, metadata, schema_version)
           VALUES ('new', 0, 'New', '{}', '{}', 1)`,
        ),
      ).rejects.toThrow(/event_id/);
      await expect(
        empty.db.query(
          `INSERT INTO kl_events (event_id, stream_id, stream_revision, type, data, metadata,
                                  schema_version)
           VALUES ($1, 'new', 0, 'New', '{}', '{}', 1)`,
          [rows[0].event_id],
        ),
      ).rejects.toThrow(/kl_events_event_id/);
    } finally {
      await empty.drop();
    }
  });
});
