import { ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { Client } from 'pg';
import { openBenchDatabase, openBenchServer } from './support/bench-database';
import { generateBigState } from './support/big-state-generator';
import { QUERIES, STATE_NAME } from './support/big-state-queries';
import { httpBackend, killAll, startKld } from './support/refresh-processes';
import { send as sendRequest } from './support/http-send';
import { DatabaseCpuMeter, processCpuMs } from './support/process-cpu';
import { startStaticServer } from './support/static-server';
import { printMachine, printTable } from './support/report';
import { distribution, formatInt, formatMs } from './support/stats';
import { terraformEnv } from './support/terraform-env';

/**
 * The size ladder (issue 14): for each size, a fresh kld on a fresh database
 * gets the big-state example's document (examples/big-state, 2 × size + 8
 * instances) and is timed on what terraform and operators do to it — the
 * full POST, delta POSTs, GET, the seed queries, a projection rebuild — with
 * kld's CPU (and the embedded PostgreSQL's, where metered) and kld's peak RSS,
 * over the run and in each phase. In the same run, the peers: a static file server of the
 * same bytes for GET, `jq` over the file for the queries, and terraform's
 * own `pg` backend for `terraform state push` (same PostgreSQL). Prints
 * figures; never fails on a miss.
 *
 *   npm run bench:ladder
 *   KL_BENCH_SIZES=1000,10000,20000,100000   instances (approximately: 2 × size + 8)
 *   KL_BENCH_DELTAS=10  KL_BENCH_GET_REPS=5  KL_BENCH_SKIP_TERRAFORM=1
 *   KL_BENCH_PUSH_REPS=5   pushes of the next serial per backend (median)
 *   KL_BENCH_QUERY_REPS=15 KL_BENCH_JQ_REPS=3   each seed query's runs (p50), jq's (median)
 *   KL_BENCH_DATABASE_URL=postgres://…  (else one embedded PostgreSQL for the run)
 *   KL_BENCH_KLD=path/to/kld.js         another build of kld (e.g. an older checkout's dist)
 */

const SIZES = (process.env.KL_BENCH_SIZES ?? '1000,10000,20000,100000')
  .split(',')
  .map((s) => Number(s.trim()))
  .filter((n) => n >= 20);
const DELTAS = Number(process.env.KL_BENCH_DELTAS ?? 10);
const GET_REPS = Number(process.env.KL_BENCH_GET_REPS ?? 5);
const SKIP_TERRAFORM = process.env.KL_BENCH_SKIP_TERRAFORM === '1';
const PUSH_REPS = Math.max(1, Number(process.env.KL_BENCH_PUSH_REPS ?? 5));
// Three runs of a 20 ms query gave a p50 that moved by a third between runs
// of one hour (docs/performance-history.md, "The seed queries' round trip
// (wave 25)"): the p50 of fifteen, with the first three's beside it.
const QUERY_REPS = Math.max(3, Number(process.env.KL_BENCH_QUERY_REPS ?? 15));
const JQ_REPS = Math.max(1, Number(process.env.KL_BENCH_JQ_REPS ?? 3));
const ROOT = path.resolve(__dirname, '../..');
const KLD = process.env.KL_BENCH_KLD ?? path.join(ROOT, 'dist/src/kld.js');

const undo: (() => Promise<void> | void)[] = [];
const children = new Set<ChildProcess>();

async function cleanup(): Promise<void> {
  for (const child of children) child.kill('SIGKILL');
  await killAll();
  while (undo.length) await Promise.resolve(undo.pop()!()).catch(() => undefined);
}

interface Rung {
  instances: number;
  mib: string;
  cells: Record<string, string>;
}

/** The embedded postmaster of the run, to meter PostgreSQL's CPU (null on KL_BENCH_DATABASE_URL). */
let postmaster: number | null = null;

async function main(): Promise<void> {
  const logger = pino({ level: 'warn' }, pino.destination(2));
  process.once('SIGINT', () => void cleanup().finally(() => process.exit(130)));
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-bench-ladder-'));
  undo.push(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const server = await openBenchServer(logger, undo, 'kl-bench-ladder');
  postmaster = server.postmaster;
  const serverUrl = server.url;
  console.log('Size ladder: kld against a static file server, jq and the terraform pg backend');
  printMachine();
  const rungs: Rung[] = [];
  for (const instances of SIZES) {
    rungs.push(await rung(instances, tmp, serverUrl, logger));
    printLadder(rungs);
  }
  console.log(
    `  load after: ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} (1/5/15 min)`,
  );
}

async function rung(
  instances: number,
  tmp: string,
  serverUrl: string,
  logger: pino.Logger,
): Promise<Rung> {
  const size = Math.max(1, Math.round((instances - 8) / 2));
  const big = generateBigState({ size });
  const dir = path.join(tmp, `size-${size}`);
  fs.mkdirSync(dir);
  const file = path.join(dir, 'state.tfstate');
  fs.writeFileSync(file, big.text);
  // Another build's kld migrates its database itself (it may know fewer migrations).
  const db = await openBenchDatabase(logger, { migrate: process.env.KL_BENCH_KLD === undefined });
  const kld = await startKld(KLD, db.url, path.join(dir, 'kld'));
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const meter = postmaster
    ? new DatabaseCpuMeter(postmaster, new URL(db.url).pathname.slice(1))
    : null;
  /** kld's CPU since `kld0` (ms), and PostgreSQL's since `pg0` when metered. */
  const cpuSince = (kld0: number, pg0: number) =>
    `kld CPU ${formatMs(processCpuMs(kld.pid) - kld0)} ms` +
    (meter ? `, PostgreSQL ${formatMs(meter.totalMs() - pg0)} ms` : '');
  const cells: Record<string, string> = {};
  console.log(
    `\n${formatInt(big.instanceCount)} instances, ${mib(big.text.length)}: kld pid ${kld.pid}`,
  );
  try {
    const stateUrl = `${kld.url}/v1/states/${STATE_NAME}`;
    const peaks = new PhasePeaks(kld.pid);
    const cpu0 = processCpuMs(kld.pid);
    const pg0 = meter?.totalMs() ?? 0;
    const full = await send(agent, 'POST', stateUrl, Buffer.from(big.text));
    cells.full = `${formatMs(full.ms)} ms (${cpuSince(cpu0, pg0)})`;
    peaks.end('full');

    // Deltas as terraform writes them: the whole document, one instance changed, serial + 1.
    const doc = JSON.parse(big.text) as Doc;
    const editable = doc.resources.flatMap((r) => r.instances).filter((i) => i.attributes);
    const delta = async (changed: number, round: number): Promise<number> => {
      for (let k = 0; k < changed; k++) {
        const instance = editable[(round * 7919 + k * 104_729) % editable.length];
        instance.attributes!.kl_bench_revision = `${round}-${k}`;
      }
      doc.serial += 1;
      return (await send(agent, 'POST', stateUrl, Buffer.from(JSON.stringify(doc, null, 2) + '\n')))
        .ms;
    };
    const one: number[] = [];
    const oneCpu0 = processCpuMs(kld.pid);
    for (let i = 0; i < DELTAS; i++) one.push(await delta(1, i));
    const oneCpu = (processCpuMs(kld.pid) - oneCpu0) / DELTAS;
    const ten: number[] = [];
    const tens = Math.max(1, Math.floor(DELTAS / 3));
    const tenCpu0 = processCpuMs(kld.pid);
    for (let i = 0; i < tens; i++) ten.push(await delta(10, 1000 + i));
    const tenCpu = (processCpuMs(kld.pid) - tenCpu0) / tens;
    cells.delta1 = `${spread(one)} (kld CPU ${formatMs(oneCpu)} ms each)`;
    cells.delta10 = `${spread(ten)} (kld CPU ${formatMs(tenCpu)} ms each)`;
    peaks.end('deltas');
    const current = JSON.stringify(doc, null, 2) + '\n';
    fs.writeFileSync(file, current);

    const staticServer = await startStaticServer(file);
    children.add(staticServer.child);
    const gets: number[] = [];
    const statics: number[] = [];
    for (let i = 0; i < GET_REPS; i++) {
      gets.push((await send(agent, 'GET', stateUrl)).ms);
      statics.push((await send(agent, 'GET', staticServer.url)).ms);
    }
    cells.get = `${spread(gets)} (static ${spread(statics)})`;
    peaks.end('get');

    for (const q of QUERIES) {
      const ours: number[] = [];
      for (let i = 0; i < QUERY_REPS; i++) {
        const r = await send(
          agent,
          'POST',
          `${kld.url}/v1/query`,
          Buffer.from(JSON.stringify({ sql: q.sql, max_rows: 100_000 })),
        );
        if (r.status !== 200)
          throw new Error(`query ${q.key}: ${r.status} ${r.body.slice(0, 200)}`);
        ours.push(r.ms);
      }
      const jq: number[] = [];
      for (let i = 0; i < JQ_REPS; i++) jq.push(await timedJq(q.jq, file));
      const p50 = distribution(ours).p50;
      const jqMs = distribution(jq).p50;
      cells[q.key] =
        `${formatMs(p50)} ms (first 3: ${formatMs(distribution(ours.slice(0, 3)).p50)}) ` +
        `(jq ${formatMs(jqMs)} ms: ${(jqMs / p50).toFixed(1)}×)`;
    }
    peaks.end('queries');

    const rebuildCpu0 = processCpuMs(kld.pid);
    const rebuildPg0 = meter?.totalMs() ?? 0;
    const rebuild = await send(
      agent,
      'POST',
      `${kld.url}/v1/admin/projections/rebuild`,
      Buffer.from('{}'),
    );
    if (rebuild.status !== 200) throw new Error(`rebuild: ${rebuild.status} ${rebuild.body}`);
    cells.rebuild = `${formatMs(rebuild.ms)} ms (${cpuSince(rebuildCpu0, rebuildPg0)})`;
    peaks.end('rebuild');
    Object.assign(cells, peaks.cells());

    if (!SKIP_TERRAFORM) {
      const tf = await terraformPushes(dir, serverUrl, kld, big.text, current);
      cells.push = tf.first;
      cells.pushNext = tf.next;
    }
    staticServer.child.kill('SIGTERM');
  } finally {
    meter?.stop();
    agent.destroy();
    await kld.stop();
    await db.close();
  }
  return { instances: big.instanceCount, mib: mib(big.text.length), cells };
}

const COLUMNS: [string, string][] = [
  ['full', 'full POST'],
  ['delta1', 'delta POST, 1 changed (p50/max)'],
  ['delta10', 'delta POST, 10 changed'],
  ['get', 'GET (p50/max)'],
  ['by-type', 'by type'],
  ['by-module', 'by module'],
  ['blast-radius', 'blast radius'],
  ['rebuild', 'rebuild'],
  ['rss', 'kld peak RSS'],
  ['rss-full', '  during full POST'],
  ['rss-deltas', '  during deltas'],
  ['rss-get', '  during GET'],
  ['rss-queries', '  during queries'],
  ['rss-rebuild', '  during rebuild'],
  ['rss-end', '  resident after rebuild'],
  ['push', 'state push -force, empty (pg)'],
  ['pushNext', 'state push -force, next serial, median (pg)'],
];

function printLadder(rungs: Rung[]): void {
  console.log(`\nladder (load now ${os.loadavg()[0].toFixed(2)}):`);
  const columns = COLUMNS.filter(([key]) => rungs.some((r) => r.cells[key] !== undefined));
  printTable(
    ['measure', ...rungs.map((r) => `${formatInt(r.instances)} inst (${r.mib})`)],
    columns.map(([key, label]) => [label, ...rungs.map((r) => r.cells[key] ?? '-')]),
  );
}

interface Doc {
  serial: number;
  resources: { instances: { attributes?: Record<string, unknown> }[] }[];
}

/** A request whose state POST must be accepted: a refused one stops the rung with its answer. */
async function send(agent: http.Agent, method: string, url: string, body?: Buffer) {
  const r = await sendRequest(agent, method, url, body);
  if (method === 'POST' && url.includes('/v1/states/') && r.status !== 200) {
    throw new Error(`${method} ${url}: ${r.status} ${r.body.slice(0, 300)}`);
  }
  return r;
}

/** One `jq` run over the file, wall clock (ms); NaN if it failed. */
function timedJq(filter: string, file: string): Promise<number> {
  return new Promise((resolve) => {
    const startedAt = performance.now();
    execFile('jq', ['-c', filter, file], { maxBuffer: 1 << 30 }, (err) =>
      resolve(err ? NaN : performance.now() - startedAt),
    );
  });
}

/**
 * kld's peak resident memory in each phase of a rung and over the whole run:
 * VmHWM (the most resident memory since it was last reset) read at the end of
 * each phase, then reset for the next one by writing 5 to clear_refs (Linux).
 * Where the reset is refused, each phase shows the peak so far.
 */
class PhasePeaks {
  private readonly peaks = new Map<string, number>();
  private whole: number;

  constructor(private readonly pid: number) {
    this.whole = this.status('VmHWM');
    this.reset();
  }

  end(phase: string): void {
    const peak = this.status('VmHWM');
    this.peaks.set(phase, peak);
    this.whole = Math.max(this.whole, peak);
    this.reset();
  }

  cells(): Record<string, string> {
    const cells: Record<string, string> = { rss: `${formatInt(this.whole)} MiB` };
    for (const [phase, peak] of this.peaks) cells[`rss-${phase}`] = `${formatInt(peak)} MiB`;
    cells['rss-end'] = `${formatInt(this.status('VmRSS'))} MiB`;
    return cells;
  }

  /** A field of /proc/PID/status in MiB. */
  private status(field: 'VmHWM' | 'VmRSS'): number {
    const status = fs.readFileSync(`/proc/${this.pid}/status`, 'utf8');
    return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? NaN) / 1024;
  }

  private reset(): void {
    try {
      fs.writeFileSync(`/proc/${this.pid}/clear_refs`, '5');
    } catch {
      // Not Linux, or not allowed: the phases show the running peak.
    }
  }
}

/**
 * `terraform state push -force` of the document into an empty workspace, then
 * PUSH_REPS pushes of the next serial over it (one more instance changed each
 * time), to the pg backend and to kld's http backend, taking turns. A single
 * push of a small state is a few tens of milliseconds of work among
 * terraform's own start-up: the median of several is the figure, with kld's
 * CPU per push beside it.
 */
async function terraformPushes(
  dir: string,
  serverUrl: string,
  kld: { url: string; pid: number },
  first: string,
  next: string,
): Promise<{ first: string; next: string }> {
  const rc = path.join(dir, 'terraformrc');
  fs.writeFileSync(rc, '# empty: the pg and http backends are built in\n');
  const env = terraformEnv(rc);
  const dbName = `kl_bench_tfpg_${randomBytes(4).toString('hex')}`;
  await adminQuery(serverUrl, `CREATE DATABASE ${dbName}`);
  undo.push(() => adminQuery(serverUrl, `DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`));
  const conn = new URL(serverUrl);
  conn.pathname = `/${dbName}`;
  conn.searchParams.set('sslmode', 'disable');
  const backends = {
    pg: `terraform {\n  backend "pg" {\n    conn_str = ${JSON.stringify(conn.toString())}\n  }\n}\n`,
    http: `terraform {\n${httpBackend(kld.url, 'bench/terraform-http')}}\n`,
  };
  const file = path.join(dir, 'push.tfstate');
  const ms: Record<'pg' | 'http', number[]> = { pg: [], http: [] };
  const kldCpu: number[] = [];
  for (const kind of ['pg', 'http'] as const) {
    const cwd = path.join(dir, `tf-${kind}`);
    fs.mkdirSync(cwd);
    fs.writeFileSync(path.join(cwd, 'main.tf'), backends[kind]);
    await terraform(cwd, env, ['init', '-input=false', '-no-color']);
  }
  const push = async (text: string, rep: number) => {
    fs.writeFileSync(file, text);
    for (const kind of ['pg', 'http'] as const) {
      const cwd = path.join(dir, `tf-${kind}`);
      const cpu0 = processCpuMs(kld.pid);
      ms[kind].push(await terraform(cwd, env, ['state', 'push', '-force', '-no-color', file]));
      if (kind === 'http' && rep > 0) kldCpu.push(processCpuMs(kld.pid) - cpu0);
    }
  };
  await push(first, 0);
  const doc = JSON.parse(next) as Doc;
  const editable = doc.resources.flatMap((r) => r.instances).filter((i) => i.attributes);
  for (let rep = 1; rep <= PUSH_REPS; rep++) {
    if (rep > 1) {
      editable[(rep * 7919) % editable.length].attributes!.kl_bench_push = rep;
      doc.serial += 1;
    }
    await push(rep === 1 ? next : JSON.stringify(doc, null, 2) + '\n', rep);
  }
  const firstCell = `${formatMs(ms.http[0])} ms (pg ${formatMs(ms.pg[0])}, ${(ms.http[0] / ms.pg[0]).toFixed(2)}×)`;
  const ours = distribution(ms.http.slice(1)).p50;
  const theirs = distribution(ms.pg.slice(1)).p50;
  const nextCell =
    `${formatMs(ours)} ms (pg ${formatMs(theirs)}, ${(ours / theirs).toFixed(2)}×; ` +
    `${PUSH_REPS} each, kld CPU ${formatMs(distribution(kldCpu).p50)} ms)`;
  return { first: firstCell, next: nextCell };
}

function terraform(cwd: string, env: NodeJS.ProcessEnv, args: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const startedAt = performance.now();
    const child = spawn('terraform', args, { cwd, env, stdio: ['ignore', 'ignore', 'pipe'] });
    children.add(child);
    let err = '';
    child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      children.delete(child);
      if (code === 0) resolve(performance.now() - startedAt);
      else reject(new Error(`terraform ${args.join(' ')} exited ${code}: ${err.trim()}`));
    });
  });
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

function spread(ms: number[]): string {
  const d = distribution(ms);
  return `${formatMs(d.p50)}/${formatMs(d.max)} ms`;
}

function mib(bytes: number): string {
  return `${(bytes / 2 ** 20).toFixed(1)} MiB`;
}

main()
  .then(cleanup)
  .catch(async (err: unknown) => {
    console.error(err);
    await cleanup();
    process.exit(1);
  });
