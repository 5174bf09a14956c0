import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Client } from 'pg';
import { connectionOptions } from './connection-options';
import type { Logger } from '../logging/logger';
import { packageRoot } from '../package-root';
import { DomainError } from '../../domain/shared/domain-error';

export interface Migration {
  id: number;
  name: string;
  sql: string;
  checksum: string;
}

export class MigrationError extends DomainError {
  constructor(message: string) {
    super('MIGRATION.FAILED', message);
    this.name = 'MigrationError';
  }
}

// One constant key: every kld racing to migrate the same database queues on it.
const MIGRATION_LOCK_KEY = 7_300_422_001;

export function loadMigrations(dir = path.join(packageRoot(), 'migrations')): Migration[] {
  const files = fs
    .readdirSync(dir)
    .filter((f) => /^\d+_[\w-]+\.sql$/.test(f))
    .sort();
  const seen = new Set<number>();
  return files.map((name) => {
    const id = Number(name.split('_')[0]);
    if (seen.has(id)) throw new MigrationError(`two migrations share number ${id} in ${dir}`);
    seen.add(id);
    const sql = fs.readFileSync(path.join(dir, name), 'utf8');
    return { id, name, sql, checksum: createHash('sha256').update(sql).digest('hex') };
  });
}

/**
 * Applies pending migrations in order, each in its own transaction, under a
 * session advisory lock so that concurrent starts migrate once. An applied
 * migration whose file changed stops everything: silently diverging schemas
 * are worse than a refused start.
 */
export async function migrate(
  url: string,
  logger: Logger,
  migrations = loadMigrations(),
  locks: LockWaits = DEFAULT_LOCK_WAITS,
): Promise<{ applied: string[] }> {
  const client = new Client(connectionOptions(url));
  client.on('error', () => undefined); // a lost connection fails the next statement instead
  await client.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    await client.query(`CREATE TABLE IF NOT EXISTS kl_migrations (
      id integer PRIMARY KEY,
      name text NOT NULL,
      checksum text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const { rows } = await client.query<{ id: number; name: string; checksum: string }>(
      'SELECT id, name, checksum FROM kl_migrations ORDER BY id',
    );
    const applied = new Map(rows.map((r) => [r.id, r]));
    verifyApplied(applied, migrations);
    const done: string[] = [];
    for (const m of migrations) {
      if (applied.has(m.id)) continue;
      await applyWaitingBriefly(client, m, logger, locks);
      logger.info({ migration: m.name }, 'migration applied');
      done.push(m.name);
    }
    await openLogEpochIfBehind(client, logger);
    return { applied: done };
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]).catch(() => null);
    await client.end();
  }
}

/** How long one attempt of a migration waits for a table's lock, and how long it tries in all. */
export interface LockWaits {
  attemptMs: number;
  giveUpAfterMs: number;
}

// A query of the SQL surface may read a table for up to 5 minutes: 10 minutes outlasts one.
const DEFAULT_LOCK_WAITS: LockWaits = { attemptMs: 3_000, giveUpAfterMs: 600_000 };

/**
 * Applies one migration in its own transaction. A DDL statement waiting for a
 * table's lock makes every later reader and writer of that table queue
 * behind it: during a rolling upgrade, one long `kl query` on the old
 * replicas would stop every commit of every replica until it ended. So an
 * attempt waits for a lock at most `attemptMs`, then gives way (the queue
 * behind it moves on) and tries again, until `giveUpAfterMs`.
 */
async function applyWaitingBriefly(
  client: Client,
  m: Migration,
  logger: Logger,
  { attemptMs, giveUpAfterMs }: LockWaits,
): Promise<void> {
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    await client.query('BEGIN');
    try {
      await client.query(`SET LOCAL lock_timeout = ${Math.max(1, Math.round(attemptMs))}`);
      await client.query(m.sql);
      await client.query('INSERT INTO kl_migrations (id, name, checksum) VALUES ($1, $2, $3)', [
        m.id,
        m.name,
        m.checksum,
      ]);
      await client.query('COMMIT');
      return;
    } catch (err) {
      await client.query('ROLLBACK');
      const waited = Date.now() - started;
      if (!lockNotGranted(err)) {
        throw new MigrationError(`migration ${m.name} failed: ${(err as Error).message}`);
      }
      if (waited >= giveUpAfterMs) {
        throw new MigrationError(
          `migration ${m.name} could not lock what it changes in ${Math.round(waited / 1000)} s ` +
            `(${attempt} tries): a session holds it; see pg_locks and pg_stat_activity, ` +
            'end that session, and start again',
        );
      }
      logger.warn(
        { migration: m.name, attempt },
        'a table the migration changes is in use; giving way and trying again',
      );
      await new Promise((resolve) => setTimeout(resolve, Math.min(attemptMs, 1_000)));
    }
  }
}

/** lock_not_available (the attempt's lock_timeout) or a deadlock PostgreSQL broke. */
function lockNotGranted(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return code === '55P03' || code === '40P01';
}

/**
 * A database restored into a cluster whose transaction ids are behind its log
 * gets the log's next epoch now, before anything reads it: until then the
 * stored events would sit above the readers' horizon. Appends check the same
 * themselves (migrations/012_log_epochs.sql).
 */
async function openLogEpochIfBehind(client: Client, logger: Logger): Promise<void> {
  const { rows } = await client.query<{ ok: boolean }>(
    "SELECT to_regproc('kl_log_writable_epoch') IS NOT NULL AS ok",
  );
  if (!rows[0].ok) return;
  const before = await client.query<{ epoch: number }>('SELECT kl_log_epoch() AS epoch');
  const after = await client.query<{ epoch: number }>('SELECT kl_log_writable_epoch() AS epoch');
  if (after.rows[0].epoch !== before.rows[0].epoch) {
    logger.warn(
      { epoch: after.rows[0].epoch },
      "this cluster's transaction ids are behind the event log (restored from a dump?): " +
        'new events are written in a new log epoch, after every stored one',
    );
  }
}

/** True when every known migration is applied unchanged (for /readyz). */
export async function migrationsCurrent(
  query: (sql: string) => Promise<{ id: number; checksum: string }[]>,
  migrations = loadMigrations(),
): Promise<boolean> {
  const rows = await query('SELECT id, checksum FROM kl_migrations').catch(() => null);
  if (!rows) return false;
  const applied = new Map(rows.map((r) => [r.id, r.checksum]));
  return migrations.every((m) => applied.get(m.id) === m.checksum);
}

function verifyApplied(
  applied: Map<number, { name: string; checksum: string }>,
  migrations: Migration[],
): void {
  const known = new Map(migrations.map((m) => [m.id, m]));
  for (const [id, row] of applied) {
    const m = known.get(id);
    if (!m) {
      throw new MigrationError(
        `database has migration ${row.name} that this kld does not know; is it an older version?`,
      );
    }
    if (m.checksum !== row.checksum) {
      throw new MigrationError(
        `migration ${m.name} was edited after it was applied (checksum ${row.checksum.slice(0, 12)}… in the database, ${m.checksum.slice(0, 12)}… on disk); restore the file and add a new migration instead`,
      );
    }
  }
}
