import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client } from 'pg';
import type { Logger } from '../../src/infrastructure/logging/logger';
import { EmbeddedPostgres } from '../../src/infrastructure/postgres/embedded-postgres';
import { migrate } from '../../src/infrastructure/postgres/migrator';
import { postmasterOf } from './process-cpu';

export interface BenchDatabase {
  /** URL of the fresh database the bench writes to, migrated unless asked not to. */
  url: string;
  /** Where the server comes from, for the report. */
  origin: string;
  /** Idempotent: drops the database, stops an embedded server, removes its temp dir. */
  close(): Promise<void>;
}

/**
 * A fresh, migrated database on `KL_BENCH_DATABASE_URL` (a server URL whose
 * user may create databases) or else on an embedded PostgreSQL in a temporary
 * directory. Everything created here is undone by `close()`, and a partially
 * built environment is undone before this throws, so the caller only has to
 * call `close()` on success.
 */
export async function openBenchDatabase(
  logger: Logger,
  options: { migrate?: boolean } = {},
): Promise<BenchDatabase> {
  const undo: (() => Promise<void>)[] = [];
  // One shared run: a second caller (say a signal handler racing the normal
  // exit path) must wait for the cleanup to finish, not return early.
  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      // Reverse order: drop the database before stopping its server, stop
      // the server before deleting its data directory.
      for (const step of undo.reverse()) await step().catch(() => undefined);
    })());
  try {
    let serverUrl = process.env.KL_BENCH_DATABASE_URL;
    let origin = 'KL_BENCH_DATABASE_URL';
    if (!serverUrl) {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-bench-pg-'));
      undo.push(async () => fs.rmSync(dir, { recursive: true, force: true }));
      const pg = await EmbeddedPostgres.start(dir, logger);
      undo.push(() => pg.stop());
      serverUrl = pg.url;
      origin = `embedded, data in ${dir}`;
    }
    const name = `kl_bench_${randomBytes(5).toString('hex')}`;
    await adminQuery(serverUrl, `CREATE DATABASE ${name}`);
    const admin = serverUrl;
    undo.push(() => adminQuery(admin, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    const url = new URL(serverUrl);
    url.pathname = `/${name}`;
    // Another build's kld migrates its database itself (it refuses migrations it does not know).
    if (options.migrate !== false) await migrate(url.toString(), logger);
    return { url: url.toString(), origin, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/**
 * The server a bench of several databases runs on: KL_BENCH_DATABASE_URL, or
 * an embedded PostgreSQL started here in a temporary directory of its own
 * (the server may run as another OS user), which `undo` stops and removes.
 * Sets KL_BENCH_DATABASE_URL for the rest of the run; `postmaster` is the
 * embedded server's pid, to meter PostgreSQL's CPU (null for a given server).
 */
export async function openBenchServer(
  logger: Logger,
  undo: (() => Promise<void> | void)[],
  prefix: string,
): Promise<{ url: string; postmaster: number | null }> {
  const given = process.env.KL_BENCH_DATABASE_URL;
  if (given) return { url: given, postmaster: null };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${prefix}-pg-`));
  undo.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  const pg = await EmbeddedPostgres.start(dir, logger);
  undo.push(() => pg.stop());
  process.env.KL_BENCH_DATABASE_URL = pg.url;
  return { url: pg.url, postmaster: postmasterOf(dir) };
}

async function adminQuery(url: string, sql: string): Promise<void> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}
