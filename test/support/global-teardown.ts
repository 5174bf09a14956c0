import * as fs from 'node:fs';
import type { EmbeddedPostgres } from '../../src/infrastructure/postgres/embedded-postgres';

export default async function globalTeardown(): Promise<void> {
  const cache = (globalThis as { __klTestCache?: string }).__klTestCache;
  if (cache) fs.rmSync(cache, { recursive: true, force: true });
  const state = (globalThis as { __klTestPg?: { pg: EmbeddedPostgres; dir: string } }).__klTestPg;
  if (!state) return;
  await state.pg.stop();
  fs.rmSync(state.dir, { recursive: true, force: true });
}
