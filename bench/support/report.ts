import * as os from 'node:os';
import { Client } from 'pg';

/**
 * What every bench prints the same way: the machine it ran on (load
 * included: other work on the box eats into every figure), the PostgreSQL
 * version, and an aligned table of results.
 */
export function printMachine(label = 'machine'): void {
  const cpus = os.cpus();
  const load = os.loadavg();
  const pad = (s: string) => `  ${`${s}:`.padEnd(10)}`;
  console.log(
    `${pad(label)}${cpus.length} × ${cpus[0]?.model.trim() ?? 'unknown CPU'}, ` +
      `${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, ${os.platform()} ${os.release()} ${os.arch()}`,
  );
  const busy = load[0] > cpus.length * 0.5 ? '  (busy: other work shares the CPUs)' : '';
  console.log(
    `${pad('load')}${load.map((l) => l.toFixed(2)).join(' ')} (1/5/15 min) before${busy}`,
  );
}

export async function postgresSettings(
  url: string,
  names: readonly string[] = ['server_version'],
): Promise<Record<string, string>> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ name: string; setting: string }>(
      `SELECT name, current_setting(name) AS setting FROM unnest($1::text[]) AS name`,
      [names],
    );
    return Object.fromEntries(rows.map((r) => [r.name, r.setting]));
  } finally {
    await client.end();
  }
}

/** Columns padded to their widest cell, a rule under the header. */
export function printTable(head: readonly string[], rows: readonly (readonly string[])[]): void {
  const width = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (r: readonly string[]) =>
    `  ${r.map((c, i) => c.padEnd(width[i])).join('  ')}`.trimEnd();
  console.log(line(head));
  console.log(`  ${width.map((w) => '-'.repeat(w)).join('  ')}`);
  for (const r of rows) console.log(line(r));
}

/** The same, for rows kept as objects: `head` names the columns and their order. */
export function printRecords<K extends string>(
  head: Record<K, string>,
  rows: readonly Record<K, string>[],
): void {
  const keys = Object.keys(head) as K[];
  printTable(
    keys.map((k) => head[k]),
    rows.map((r) => keys.map((k) => r[k])),
  );
}
