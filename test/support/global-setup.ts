import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client } from 'pg';
import pino from 'pino';
import { EmbeddedPostgres } from '../../src/infrastructure/postgres/embedded-postgres';
import { createTemplateDatabase } from './test-database';

/**
 * One PostgreSQL server for the whole run: KL_TEST_DATABASE_URL if given
 * (a server URL whose user may create databases), else an embedded one in a
 * temporary directory. Each test file creates its own database on it, a copy
 * of one template migrated here (its name is unique to the run, so that runs
 * sharing a server never share a template; the global teardown drops it).
 */
export default async function globalSetup(): Promise<void> {
  // kl's local schema cache: one per run, never the user's ~/.cache.
  if (!process.env.KL_CACHE_DIR) {
    process.env.KL_CACHE_DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-test-cache-'));
    (globalThis as { __klTestCache?: string }).__klTestCache = process.env.KL_CACHE_DIR;
  }
  if (!process.env.KL_TEST_DATABASE_URL) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-test-pg-'));
    const pg = await EmbeddedPostgres.start(dir, pino({ level: 'warn' }));
    process.env.KL_TEST_DATABASE_URL = pg.url;
    (globalThis as { __klTestPg?: { pg: EmbeddedPostgres; dir: string } }).__klTestPg = { pg, dir };
  }
  const admin = new Client({ connectionString: process.env.KL_TEST_DATABASE_URL });
  await admin.connect();
  try {
    process.env.KL_TEST_TEMPLATE_DATABASE = await createTemplateDatabase(admin);
  } finally {
    await admin.end();
  }
}
