import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { Client } from 'pg';
import { Database } from '../../src/infrastructure/postgres/database';
import { migrate } from '../../src/infrastructure/postgres/migrator';

export const quietLogger = pino({ level: process.env.KL_TEST_LOG_LEVEL ?? 'silent' });

function serverUrl(): string {
  const url = process.env.KL_TEST_DATABASE_URL;
  if (!url) throw new Error('KL_TEST_DATABASE_URL is not set: jest global setup did not run');
  return url;
}

function templateName(): string {
  const name = process.env.KL_TEST_TEMPLATE_DATABASE;
  if (!name) throw new Error('KL_TEST_TEMPLATE_DATABASE is not set: jest global setup did not run');
  return name;
}

export interface TestDatabase {
  url: string;
  db: Database;
  drop(): Promise<void>;
}

/**
 * A fresh, migrated database of its own for one test file: a copy of the
 * run's template (migrated once by the global setup), which takes a fifth of
 * the time of running every migration again.
 */
export async function createTestDatabase(prefix = 'kl_test'): Promise<TestDatabase> {
  return createDatabase(prefix, templateName());
}

/** A fresh database with nothing in it, not even migrations. */
export async function createEmptyDatabase(prefix = 'kl_empty'): Promise<TestDatabase> {
  return createDatabase(prefix, null);
}

/**
 * Migrates a new database with a unique name into the run's template for
 * `createTestDatabase`, and closes it to connections: CREATE DATABASE … TEMPLATE
 * fails while anyone is connected to the template.
 */
export async function createTemplateDatabase(admin: Client): Promise<string> {
  const name = `kl_template_${randomBytes(5).toString('hex')}`;
  await admin.query(`CREATE DATABASE ${name}`);
  await migrate(databaseUrl(name), quietLogger);
  await admin.query(`ALTER DATABASE ${name} WITH ALLOW_CONNECTIONS false IS_TEMPLATE true`);
  return name;
}

export async function dropTemplateDatabase(admin: Client, name: string): Promise<void> {
  await admin.query(`ALTER DATABASE ${name} WITH IS_TEMPLATE false`);
  await admin.query(`DROP DATABASE IF EXISTS ${name}`);
}

async function createDatabase(prefix: string, template: string | null): Promise<TestDatabase> {
  const name = `${prefix}_${randomBytes(5).toString('hex')}`;
  const admin = new Client({ connectionString: serverUrl() });
  await admin.connect();
  try {
    if (template === null) {
      await admin.query(`CREATE DATABASE ${name}`);
    } else {
      await admin.query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
      await copyDatabaseLevelState(admin, template, name);
    }
  } finally {
    await admin.end();
  }
  const url = databaseUrl(name);
  const db = new Database(url);
  return {
    url,
    db,
    drop: async () => {
      await db.close();
      const c = new Client({ connectionString: serverUrl() });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

function databaseUrl(name: string): string {
  const url = new URL(serverUrl());
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * What migrations set on the database itself rather than in it (`ALTER ROLE …
 * IN DATABASE … SET`, `GRANT … ON DATABASE`) lives in cluster-wide catalogs
 * that CREATE DATABASE … TEMPLATE does not copy: copy it, so that a copy is
 * what migrating would have made (test-database.int-spec.ts checks).
 */
async function copyDatabaseLevelState(admin: Client, from: string, to: string): Promise<void> {
  const settings = await admin.query<{ role: string | null; setconfig: string[] }>(
    `SELECT r.rolname AS role, s.setconfig
       FROM pg_db_role_setting s
       JOIN pg_database d ON d.oid = s.setdatabase
       LEFT JOIN pg_roles r ON r.oid = s.setrole
      WHERE d.datname = $1`,
    [from],
  );
  for (const { role, setconfig } of settings.rows) {
    const target =
      role === null ? `DATABASE ${to}` : `ROLE ${admin.escapeIdentifier(role)} IN DATABASE ${to}`;
    for (const entry of setconfig) {
      const eq = entry.indexOf('=');
      const setting = entry.slice(0, eq);
      // The catalog holds the value as text; set_config parses it as SET would
      // (a list such as search_path included) and FROM CURRENT stores it.
      await admin.query('BEGIN');
      try {
        await admin.query('SELECT set_config($1, $2, true)', [setting, entry.slice(eq + 1)]);
        await admin.query(`ALTER ${target} SET ${admin.escapeIdentifier(setting)} FROM CURRENT`);
        await admin.query('COMMIT');
      } catch (err) {
        await admin.query('ROLLBACK');
        throw err;
      }
    }
  }
  const grants = await admin.query<{ grantee: string | null; privilege: string }>(
    `SELECT r.rolname AS grantee, a.privilege_type AS privilege
       FROM pg_database d, aclexplode(d.datacl) a
       LEFT JOIN pg_roles r ON r.oid = a.grantee
      WHERE d.datname = $1`,
    [from],
  );
  if (grants.rows.length === 0) return; // the default privileges, as the copy has
  await admin.query(`REVOKE ALL ON DATABASE ${to} FROM PUBLIC`);
  for (const { grantee, privilege } of grants.rows) {
    const to_ = grantee === null ? 'PUBLIC' : admin.escapeIdentifier(grantee);
    await admin.query(`GRANT ${privilege} ON DATABASE ${to} TO ${to_}`);
  }
}
