import * as fs from 'node:fs';
import { Client } from 'pg';
import type { EmbeddedPostgres } from '../../src/infrastructure/postgres/embedded-postgres';
import { dropTemplateDatabase } from './test-database';

export default async function globalTeardown(): Promise<void> {
  const cache = (globalThis as { __klTestCache?: string }).__klTestCache;
  if (cache) fs.rmSync(cache, { recursive: true, force: true });
  const template = process.env.KL_TEST_TEMPLATE_DATABASE;
  if (template && process.env.KL_TEST_DATABASE_URL) {
    // On a server given from outside the template would outlive the run.
    const admin = new Client({ connectionString: process.env.KL_TEST_DATABASE_URL });
    await admin.connect();
    try {
      await dropTemplateDatabase(admin, template);
    } finally {
      await admin.end();
    }
  }
  const state = (globalThis as { __klTestPg?: { pg: EmbeddedPostgres; dir: string } }).__klTestPg;
  if (!state) return;
  await state.pg.stop();
  fs.rmSync(state.dir, { recursive: true, force: true });
}
