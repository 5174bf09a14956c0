import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { deflateSync as zlibDeflate } from 'node:zlib';
import { Client } from 'pg';
import pino from 'pino';
import { openBenchDatabase, openBenchServer } from './bench-database';
import { generateBigState } from './big-state-generator';
import { fillLog } from './fill-log';
import {
  afterKldStarted,
  beforeKldStarts,
  describeDurability,
  logDurabilityOf,
} from './log-durability';
import { send } from './http-send';
import { DatabaseCpuMeter, processCpuMs } from './process-cpu';
import { killAll, startKld, type Kld } from './refresh-processes';
import { printMachine, printTable } from './report';
import { distribution, formatInt, formatMs } from './stats';
import { walInsertPosition } from './wal-position';

/**
 * How many bytes of WAL a big commit writes, and where they go (issue 14's
 * `state push -force`). Per round, taking turns: a full POST of the
 * big-state example into an empty state on each kld build (each on its own
 * database of one embedded PostgreSQL), and the same document stored the way
 * terraform's `pg` backend stores a push (one `text` row in its `states`
 * table, its upsert statement). For each: the wall, kld's and PostgreSQL's
 * CPU, the WAL between the insert positions before and after, and (from
 * pg_walinspect, which the embedded server ships) that WAL split by the
 * relation each record's blocks belong to (heap, TOAST, each index), with the
 * full-page images apart, and the records that name no block (commits and
 * the like). Then the bytes per event of the log's columns.
 *
 *   KL_UNLOGGED_READ_MODELS=on node dist/bench/support/log-wal-probe.js [label=kld.js[+KEY=VALUE…] ...]
 *     a build's suffixes: KL_PROBE_LOG=unlogged, KL_PROBE_SYNCHRONOUS_COMMIT=off (bench-only
 *     variants of its database, log-durability.ts); the same kld.js may be given under several labels
 *   KL_PROBE_ROUNDS=3        rounds
 *   KL_BENCH_INSTANCES=20000 instances (approximately)
 *   KL_PROBE_SETTLE_MS=8000  pause after each write (kld's work after the answer stays out of the next window)
 *   KL_PROBE_WAL_COMPRESSION=pglz  the server's wal_compression (full-page images), for every target
 *   KL_PROBE_LOG_EVENTS=0    filler events put in each kld's log first (a long-lived log: its
 *                            indexes have pages a commit's random keys land all over)
 *   KL_PROBE_TOGETHER=0      1: then, on the first kld's first POST, how small each event type's
 *                            data would be stored together (one text of the concatenation: TOAST's
 *                            pglz, and zlib in node for comparison, with the CPU each took)
 *   KL_PROBE_CHECKPOINT=0    1: a CHECKPOINT before each write, so every page a write touches
 *                            first costs a full-page image (as in a server's steady state)
 *
 * A build other than this one migrates its own database (kld refuses a
 * migration it does not know).
 */

const ROUNDS = Number(process.env.KL_PROBE_ROUNDS ?? 3);
const INSTANCES = Number(process.env.KL_BENCH_INSTANCES ?? 20_000);
const SETTLE_MS = Number(process.env.KL_PROBE_SETTLE_MS ?? 8_000);
const LOG_EVENTS = Number(process.env.KL_PROBE_LOG_EVENTS ?? 0);
const CHECKPOINT = process.env.KL_PROBE_CHECKPOINT === '1';
const TOGETHER = process.env.KL_PROBE_TOGETHER === '1';
const ROOT = path.resolve(__dirname, '../../..');

interface Target {
  label: string;
  databaseUrl: string;
  kld: Kld | null;
  meter: DatabaseCpuMeter | null;
  agent: http.Agent;
  samples: { ms: number; kldCpu: number; pgCpu: number; wal: number }[];
  split: Map<string, number[]>;
}

const undo: (() => Promise<void> | void)[] = [];

async function main(): Promise<void> {
  const logger = pino({ level: 'warn' }, pino.destination(2));
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-log-wal-'));
  undo.push(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const server = await openBenchServer(logger, undo, 'kl-log-wal');
  const walCompression = process.env.KL_PROBE_WAL_COMPRESSION;
  if (walCompression) {
    await query(
      server.url,
      `ALTER SYSTEM SET wal_compression = '${walCompression.replace(/'/g, '')}'`,
    );
    await query(server.url, 'SELECT pg_reload_conf()');
  }
  const builds = process.argv.slice(2).map((a) => {
    const [head, ...envs] = a.split('+');
    const [label, kldJs] = head.split('=');
    const { durability, kldEnv } = logDurabilityOf(
      Object.fromEntries(envs.map((e) => e.split('=') as [string, string])),
    );
    if (Object.keys(kldEnv).length > 0)
      throw new Error(`${a}: only KL_PROBE_LOG, KL_PROBE_SYNCHRONOUS_COMMIT`);
    return { label, kldJs, durability };
  });
  if (builds.length === 0) {
    const { durability } = logDurabilityOf({});
    builds.push({ label: 'this build', kldJs: path.join(ROOT, 'dist/src/kld.js'), durability });
  }
  const big = generateBigState({ size: Math.max(1, Math.round((INSTANCES - 8) / 2)) });
  const body = Buffer.from(big.text);
  console.log('The WAL of a big first commit: kld builds and the pg backend, taking turns');
  printMachine();
  console.log(
    `  big-state example: ${formatInt(big.instanceCount)} instances, ${(body.length / 2 ** 20).toFixed(1)} MiB; ` +
      `${ROUNDS} rounds; wal_compression ${await show(server.url, 'wal_compression')}` +
      `${CHECKPOINT ? ', a CHECKPOINT before each write' : ''}`,
  );
  const targets: Target[] = [];
  for (const { label, kldJs, durability } of builds) {
    const db = await openBenchDatabase(logger, { migrate: label === 'this build' });
    undo.push(() => db.close());
    await beforeKldStarts(db.url, durability);
    const kld = await startKld(kldJs, db.url, path.join(tmp, label.replace(/\W/g, '-')));
    await afterKldStarted(db.url, durability);
    if (describeDurability(durability))
      console.log(`  ${label}: ${describeDurability(durability)} (bench-only)`);
    if (LOG_EVENTS > 0) {
      const filled = await fillLog(db.url, LOG_EVENTS);
      console.log(`  ${label}: ${formatInt(filled.total)} events in the log first`);
    }
    undo.push(() => kld.stop());
    targets.push(target(label, db.url, kld, server.postmaster));
  }
  // terraform's pg backend: its table and unique name index, as it creates them.
  const pgDb = await openBenchDatabase(logger, { migrate: false });
  undo.push(() => pgDb.close());
  await query(
    pgDb.url,
    `CREATE SEQUENCE global_states_id_seq;
     CREATE TABLE states (id bigint NOT NULL DEFAULT nextval('global_states_id_seq') PRIMARY KEY,
                          name text, data text);
     CREATE UNIQUE INDEX states_name_key ON states (name)`,
  );
  targets.push(target('pg backend', pgDb.url, null, server.postmaster));
  await query(targets[0].databaseUrl, 'CREATE EXTENSION IF NOT EXISTS pg_walinspect');
  const inspector = targets[0].databaseUrl;
  const text = body.toString('utf8');

  for (let round = 1; round <= ROUNDS; round++) {
    const order = round % 2 ? targets : [...targets].reverse();
    for (const t of order) {
      const kld0 = t.kld ? processCpuMs(t.kld.pid) : 0;
      const pg0 = t.meter?.totalMs() ?? NaN;
      if (CHECKPOINT) await query(server.url, 'CHECKPOINT');
      const lsn0 = await walInsertPosition(inspector);
      let ms: number;
      if (t.kld) {
        const r = await send(t.agent, 'POST', `${t.kld.url}/v1/states/bench/first-${round}`, body);
        if (r.status !== 200) throw new Error(`POST: ${r.status} ${r.body.slice(0, 300)}`);
        ms = r.ms;
      } else {
        const started = performance.now();
        await query(
          t.databaseUrl,
          `INSERT INTO states (name, data) VALUES ($1, $2)
           ON CONFLICT (name) DO UPDATE SET data = $2 WHERE states.name = $1`,
          [`first-${round}`, text],
        );
        ms = performance.now() - started;
      }
      const lsn1 = await walInsertPosition(inspector);
      const sample = {
        ms,
        kldCpu: t.kld ? processCpuMs(t.kld.pid) - kld0 : 0,
        pgCpu: (t.meter?.totalMs() ?? NaN) - pg0,
        wal: Number(lsn1 - lsn0),
      };
      t.samples.push(sample);
      for (const [rel, bytes] of await walSplit(inspector, t.databaseUrl, lsn0, lsn1)) {
        t.split.set(rel, [...(t.split.get(rel) ?? []), bytes]);
      }
      console.log(
        `  round ${round} ${t.label}: ${formatMs(ms)} ms, kld CPU ${formatMs(sample.kldCpu)} ms, ` +
          `postgres CPU ${formatMs(sample.pgCpu)} ms, WAL ${mib(sample.wal)} MiB`,
      );
      await new Promise((r) => setTimeout(r, SETTLE_MS));
    }
  }
  console.log(
    `\nload now ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} (1/5/15 min)`,
  );
  const med = (xs: number[]) => distribution(xs).p50;
  const range = (xs: number[]) => `${formatMs(Math.min(...xs))}–${formatMs(Math.max(...xs))}`;
  printTable(
    [
      'target',
      'wall ms, median (range)',
      'kld CPU ms',
      'postgres CPU ms',
      'WAL MiB, median (range)',
    ],
    targets.map((t) => [
      t.label,
      `${formatMs(med(t.samples.map((s) => s.ms)))} (${range(t.samples.map((s) => s.ms))})`,
      t.kld ? formatMs(med(t.samples.map((s) => s.kldCpu))) : '-',
      formatMs(med(t.samples.map((s) => s.pgCpu))),
      `${mib(med(t.samples.map((s) => s.wal)))} (${mib(Math.min(...t.samples.map((s) => s.wal)))}–` +
        `${mib(Math.max(...t.samples.map((s) => s.wal)))})`,
    ]),
  );
  for (const t of targets) {
    console.log(`\n${t.label}: WAL by relation, median over the rounds (KiB)`);
    const rows = [...t.split.entries()]
      .map(([rel, xs]) => [rel, med(xs)] as const)
      .sort((a, b) => b[1] - a[1]);
    printTable(
      ['relation / part', 'KiB'],
      rows.map(([rel, bytes]) => [rel, formatInt(bytes / 1024)]),
    );
  }
  for (const t of targets.filter((x) => x.kld)) {
    const { rows } = await query<Record<string, string>>(
      t.databaseUrl,
      `SELECT count(*) AS events,
              round(avg(octet_length(data::text))) AS data_text,
              round(avg(pg_column_size(data))) AS data_stored,
              round(avg(pg_column_size(metadata))) AS metadata_stored,
              round(avg(pg_column_size(e.*))) AS row_stored,
              count(*) FILTER (WHERE pg_column_compression(data) IS NOT NULL) AS data_compressed,
              pg_relation_size('kl_events') AS heap,
              pg_relation_size(reltoastrelid) AS toast
         FROM kl_events e, pg_class c
        WHERE c.oid = 'kl_events'::regclass AND e.stream_id LIKE 'state-bench/first-%'
        GROUP BY reltoastrelid`,
    );
    console.log(
      `\n${t.label}: kl_events per event of the POSTs (bytes, averages; heap, toast: the table's)`,
      rows[0],
    );
  }
  const first = targets.find((x) => x.kld);
  if (TOGETHER && first) await together(first.databaseUrl, 'state-bench/first-1');
}

/**
 * What one commit's events of each type would take stored together: the
 * concatenation of their data (in log order) as one `text` value, which
 * PostgreSQL's TOAST compresses (pglz, the embedded server has no lz4), and
 * zlib levels 1 and 6 in node on the same bytes. The pglz CPU is the
 * difference between two INSERTs of the value into tables differing only in
 * STORAGE (EXTENDED compresses, EXTERNAL does not), medians of five each.
 */
async function together(databaseUrl: string, stream: string): Promise<void> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query(
      `CREATE TEMP TABLE together_pglz (v text);
       CREATE TEMP TABLE together_plain (v text);
       ALTER TABLE together_plain ALTER COLUMN v SET STORAGE EXTERNAL`,
    );
    const types = await client.query<{ type: string; n: string }>(
      `SELECT type, count(*)::text AS n FROM kl_events WHERE stream_id = $1
        GROUP BY type ORDER BY count(*) DESC`,
      [stream],
    );
    const rows: string[][] = [];
    for (const { type, n } of types.rows) {
      const { rows: got } = await client.query<{ v: string }>(
        `SELECT string_agg(data::text, '' ORDER BY global_position) AS v
           FROM kl_events WHERE stream_id = $1 AND type = $2`,
        [stream, type],
      );
      const text = got[0].v;
      const bytes = Buffer.byteLength(text);
      const insertMs = async (table: string) => {
        const xs: number[] = [];
        for (let i = 0; i < 5; i++) {
          await client.query(`TRUNCATE ${table}`);
          const t0 = performance.now();
          await client.query(`INSERT INTO ${table} (v) VALUES ($1)`, [text]);
          xs.push(performance.now() - t0);
        }
        return distribution(xs).p50;
      };
      const pglzMs = (await insertMs('together_pglz')) - (await insertMs('together_plain'));
      const stored = await client.query<{ size: string; method: string | null }>(
        'SELECT pg_column_size(v)::text AS size, pg_column_compression(v) AS method FROM together_pglz',
      );
      const zlib = (level: number) => {
        const c0 = process.cpuUsage();
        const out = zlibDeflate(Buffer.from(text), { level });
        const c = process.cpuUsage(c0);
        return { bytes: out.length, ms: (c.user + c.system) / 1000 };
      };
      const [z1, z6] = [zlib(1), zlib(6)];
      const ratio = (x: number) => (bytes / x).toFixed(1);
      rows.push([
        type,
        formatInt(Number(n)),
        (bytes / 2 ** 20).toFixed(2),
        `${(Number(stored.rows[0].size) / 2 ** 20).toFixed(2)} (${ratio(Number(stored.rows[0].size))}×, ${
          stored.rows[0].method ?? 'none'
        }), ~${formatMs(pglzMs)} ms`,
        `${(z1.bytes / 2 ** 20).toFixed(2)} (${ratio(z1.bytes)}×), ${formatMs(z1.ms)} ms`,
        `${(z6.bytes / 2 ** 20).toFixed(2)} (${ratio(z6.bytes)}×), ${formatMs(z6.ms)} ms`,
      ]);
    }
    console.log(`\n${stream}: each event type's data stored together (MiB)`);
    printTable(['type', 'events', 'data', 'pglz (TOAST), CPU', 'zlib 1, CPU', 'zlib 6, CPU'], rows);
  } finally {
    await client.end();
  }
}

function target(
  label: string,
  databaseUrl: string,
  kld: Kld | null,
  postmaster: number | null,
): Target {
  const meter = postmaster
    ? new DatabaseCpuMeter(postmaster, new URL(databaseUrl).pathname.slice(1))
    : null;
  undo.push(() => meter?.stop());
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  undo.push(() => agent.destroy());
  return { label, databaseUrl, kld, meter, agent, samples: [], split: new Map() };
}

/**
 * The WAL between two positions by where it went: per relation of `databaseUrl`
 * (a TOAST table named for its owner), each record's length counted once (at
 * its first block), full-page images apart; other databases' relations as one
 * line; records with no block as their resource manager's.
 */
async function walSplit(
  inspector: string,
  databaseUrl: string,
  from: bigint,
  to: bigint,
): Promise<Map<string, number>> {
  const lsn = (x: bigint) => `${(x >> 32n).toString(16)}/${(x & 0xffffffffn).toString(16)}`;
  const names = await query<{ filenode: string; name: string }>(
    databaseUrl,
    `SELECT pg_relation_filenode(c.oid)::text AS filenode,
            coalesce(o.relname || ' (TOAST)', t.relname || ' (TOAST index)', c.relname) AS name
       FROM pg_class c
       LEFT JOIN pg_class o ON o.reltoastrelid = c.oid
       LEFT JOIN pg_index i ON i.indexrelid = c.oid
       LEFT JOIN pg_class t ON t.reltoastrelid = i.indrelid
      WHERE pg_relation_filenode(c.oid) IS NOT NULL`,
  );
  const byNode = new Map(names.rows.map((r) => [r.filenode, r.name]));
  const dbOid = (
    await query<{ oid: string }>(
      databaseUrl,
      'SELECT oid::text FROM pg_database WHERE datname = current_database()',
    )
  ).rows[0].oid;
  const { rows } = await query<{
    reldatabase: string | null;
    relfilenode: string | null;
    rmgr: string;
    record: string;
    fpi: string;
  }>(
    inspector,
    `WITH r AS (
       SELECT r.start_lsn, r.resource_manager, r.record_length, r.fpi_length
         FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn) r
     ), b AS (
       SELECT DISTINCT ON (start_lsn) start_lsn, reldatabase, relfilenode
         FROM pg_get_wal_block_info($1::pg_lsn, $2::pg_lsn) ORDER BY start_lsn, block_id
     )
     SELECT b.reldatabase::text, b.relfilenode::text, r.resource_manager AS rmgr,
            sum(r.record_length - r.fpi_length)::text AS record, sum(r.fpi_length)::text AS fpi
       FROM r LEFT JOIN b USING (start_lsn)
      GROUP BY 1, 2, 3`,
    [lsn(from), lsn(to)],
  );
  const split = new Map<string, number>();
  const add = (key: string, bytes: number) => {
    if (bytes > 0) split.set(key, (split.get(key) ?? 0) + bytes);
  };
  for (const r of rows) {
    let name: string;
    if (r.relfilenode === null) name = `(no block: ${r.rmgr})`;
    else if (r.reldatabase !== dbOid) name = '(other databases and shared catalogs)';
    else name = byNode.get(r.relfilenode) ?? `(filenode ${r.relfilenode}, ${r.rmgr})`;
    add(name, Number(r.record));
    add(`${name}: full-page images`, Number(r.fpi));
  }
  return split;
}

async function show(url: string, name: string): Promise<string> {
  const { rows } = await query<{ v: string }>(url, `SELECT current_setting('${name}') AS v`);
  return rows[0].v;
}

async function query<R extends object = Record<string, unknown>>(
  url: string,
  text: string,
  values?: unknown[],
): Promise<{ rows: R[] }> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return await client.query<R>(text, values);
  } finally {
    await client.end();
  }
}

const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(2);

async function cleanup(): Promise<void> {
  while (undo.length) await Promise.resolve(undo.pop()!()).catch(() => undefined);
  await killAll();
}

process.once('SIGINT', () => void cleanup().finally(() => process.exit(130)));
main()
  .then(cleanup)
  .catch(async (err: unknown) => {
    console.error(err);
    await cleanup();
    process.exit(1);
  });
