import { spawnSync } from 'node:child_process';
import { Client } from 'pg';
import { KLD } from './kld-process';

/** `kld token create` against a database (the bootstrap path); answers the secret it printed. */
export function bootstrapToken(
  databaseUrl: string,
  name: string,
  scopes: string[],
  extra: string[] = [],
  env: NodeJS.ProcessEnv = { KL_LOG_LEVEL: 'warn' },
): { code: number | null; secret: string; stdout: string; stderr: string } {
  const r = spawnSync(
    process.execPath,
    [KLD, 'token', 'create', '--name', name, ...scopes.flatMap((s) => ['--scope', s]), ...extra],
    {
      encoding: 'utf8',
      env: { ...process.env, KL_DATABASE_URL: databaseUrl, ...env },
      timeout: 60_000,
    },
  );
  // A refusal (exit 2, one line on stderr) is the test's to check; anything
  // else (killed at the timeout, exit 1 from kld's exit watchdog naming what
  // it left open) is said here, where the test's own message cannot.
  if (r.status !== 0 && r.status !== 2) {
    console.error(
      `kld token create: status ${r.status}, signal ${r.signal}, ${r.error?.message ?? 'no spawn error'}\n${r.stderr}`,
    );
  }
  return { code: r.status, secret: r.stdout.trim(), stdout: r.stdout, stderr: r.stderr };
}

/**
 * Every row of every table of the database as text, the way a data-only
 * dump holds it. (pg_dump on this machine is older than the embedded
 * server and refuses to dump it.)
 */
export async function dumpAllRows(databaseUrl: string): Promise<string> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows: tables } = await client.query<{ t: string }>(
      `SELECT format('%I.%I', schemaname, tablename) AS t FROM pg_tables
        WHERE schemaname NOT IN ('pg_catalog', 'information_schema')`,
    );
    let out = '';
    for (const { t } of tables) {
      const { rows } = await client.query<{ r: string }>(`SELECT x::text AS r FROM ${t} x`);
      out += `-- ${t}\n${rows.map((r) => r.r).join('\n')}\n`;
    }
    return out;
  } finally {
    await client.end();
  }
}
