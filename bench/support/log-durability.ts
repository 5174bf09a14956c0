import { sql } from './refresh-processes';

/**
 * Bench-only variants of a kld database's durability, to bound what the log's
 * WAL costs a commit (docs/performance-history.md, "What the log's WAL costs a
 * push, at most"). Never a product setting: an UNLOGGED log is emptied by a
 * crash, and `synchronous_commit = off` may lose a commit kld has answered.
 *
 * Given as a build's `+KEY=VALUE` suffixes in the probes that take them:
 *   KL_PROBE_LOG=unlogged            `kl_events` UNLOGGED (no WAL for its rows or indexes),
 *                                    set once kld has migrated and before anything is written
 *   KL_PROBE_SYNCHRONOUS_COMMIT=off  the database's default for every session kld opens
 *                                    (a commit does not wait for its WAL to reach the disk)
 */
export interface LogDurability {
  unloggedLog: boolean;
  synchronousCommit: 'on' | 'off';
}

const KEYS = ['KL_PROBE_LOG', 'KL_PROBE_SYNCHRONOUS_COMMIT'];

/** Splits a build's suffixes into the durability variant and kld's own environment. */
export function logDurabilityOf(env: Record<string, string>): {
  durability: LogDurability;
  kldEnv: Record<string, string>;
} {
  const log = env.KL_PROBE_LOG ?? 'logged';
  const sync = env.KL_PROBE_SYNCHRONOUS_COMMIT ?? 'on';
  if (log !== 'logged' && log !== 'unlogged')
    throw new Error(`KL_PROBE_LOG=${log}: logged|unlogged`);
  if (sync !== 'on' && sync !== 'off')
    throw new Error(`KL_PROBE_SYNCHRONOUS_COMMIT=${sync}: on|off`);
  const kldEnv = Object.fromEntries(Object.entries(env).filter(([k]) => !KEYS.includes(k)));
  return { durability: { unloggedLog: log === 'unlogged', synchronousCommit: sync }, kldEnv };
}

/** Before kld starts: a database default reaches every connection of its pool. */
export async function beforeKldStarts(databaseUrl: string, d: LogDurability): Promise<void> {
  if (d.synchronousCommit === 'off') {
    const name = new URL(databaseUrl).pathname.slice(1);
    await sql(databaseUrl, `ALTER DATABASE ${name} SET synchronous_commit = off`);
  }
}

/** Once kld has migrated (the table exists) and before the first write. */
export async function afterKldStarted(databaseUrl: string, d: LogDurability): Promise<void> {
  if (d.unloggedLog) await sql(databaseUrl, 'ALTER TABLE kl_events SET UNLOGGED');
}

/** How a variant reads in a report ('' for the product's). */
export function describeDurability(d: LogDurability): string {
  return [
    d.unloggedLog ? 'kl_events UNLOGGED' : '',
    d.synchronousCommit === 'off' ? 'synchronous_commit off' : '',
  ]
    .filter(Boolean)
    .join(', ');
}
