import { Client } from 'pg';
import { migrate } from '../../src/infrastructure/postgres/migrator';
import {
  createEmptyDatabase,
  createTestDatabase,
  quietLogger,
  TestDatabase,
} from './test-database';

/**
 * createTestDatabase copies a template migrated once per run; a copy must be
 * what migrating an empty database makes, including what migrations set on
 * the database itself (role settings, grants), which a template copy leaves out.
 */
describe('test databases', () => {
  const made: TestDatabase[] = [];
  afterAll(async () => {
    for (const t of made) await t.drop();
  });

  async function databaseLevelState(t: TestDatabase) {
    const name = new URL(t.url).pathname.slice(1);
    const admin = new Client({ connectionString: process.env.KL_TEST_DATABASE_URL });
    await admin.connect();
    try {
      const settings = await admin.query<{ role: string | null; setconfig: string[] }>(
        `SELECT r.rolname AS role, s.setconfig
           FROM pg_db_role_setting s
           JOIN pg_database d ON d.oid = s.setdatabase
           LEFT JOIN pg_roles r ON r.oid = s.setrole
          WHERE d.datname = $1 ORDER BY 1`,
        [name],
      );
      const grants = await admin.query<{ grantee: string | null; privilege: string }>(
        `SELECT r.rolname AS grantee, a.privilege_type AS privilege
           FROM pg_database d, aclexplode(d.datacl) a
           LEFT JOIN pg_roles r ON r.oid = a.grantee
          WHERE d.datname = $1 ORDER BY 1, 2`,
        [name],
      );
      return {
        settings: settings.rows.map((r) => ({ ...r, setconfig: [...r.setconfig].sort() })),
        grants: grants.rows,
      };
    } finally {
      await admin.end();
    }
  }

  it('copies what migrating makes, also when several are made at once', async () => {
    const migrated = await createEmptyDatabase();
    made.push(migrated);
    await migrate(migrated.url, quietLogger);
    // Two at once: nobody may stay connected to the template (a second worker's copy would fail).
    const copies = await Promise.all([createTestDatabase(), createTestDatabase()]);
    made.push(...copies);

    const expected = await databaseLevelState(migrated);
    expect(expected.settings).toContainEqual({
      role: 'kl_reader',
      setconfig: expect.arrayContaining(['default_transaction_read_only=on']),
    });
    for (const copy of copies) {
      expect(await databaseLevelState(copy)).toEqual(expected);
      const schema = async (t: TestDatabase) =>
        (
          await t.db.query<{ name: string }>(
            `SELECT n.nspname || '.' || c.relname || ':' || c.relkind::text AS name
               FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
              ORDER BY 1`,
          )
        ).map((r) => r.name);
      expect(await schema(copy)).toEqual(await schema(migrated));
    }
  });
});
