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

export interface TestDatabase {
  url: string;
  db: Database;
  drop(): Promise<void>;
}

/** A fresh, migrated database of its own for one test file. */
export async function createTestDatabase(prefix = 'kl_test'): Promise<TestDatabase> {
  const t = await createEmptyDatabase(prefix);
  await migrate(t.url, quietLogger);
  return t;
}

/** A fresh database with nothing in it, not even migrations. */
export async function createEmptyDatabase(prefix = 'kl_empty'): Promise<TestDatabase> {
  const name = `${prefix}_${randomBytes(5).toString('hex')}`;
  const admin = new Client({ connectionString: serverUrl() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(serverUrl());
  url.pathname = `/${name}`;
  const db = new Database(url.toString());
  return {
    url: url.toString(),
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
