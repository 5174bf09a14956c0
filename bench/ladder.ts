import { ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { Client } from 'pg';
import { EmbeddedPostgres } from '../src/infrastructure/postgres/embedded-postgres';
import { openBenchDatabase } from './support/bench-database';
import { generateBigState } from './support/big-state-generator';
import { QUERIES, STATE_NAME } from './support/big-state-queries';
import { httpBackend, killAll, startKld } from './support/refresh-processes';
import { send as sendRequest } from './support/http-send';
import { processCpuMs } from './support/process-cpu';
import { startStaticServer } from './support/static-server';
import { printMachine, printTable } from './support/report';
import { distribution, formatInt, formatMs } from './support/stats';

/**
 * The size ladder (issue 14): for each size, a fresh kld on a fresh database
 * gets the big-state example's document (examples/big-state, 2 × size + 8
 * instances) and is timed on what terraform and operators do to it — the
 * full POST, delta POSTs, GET, the seed queries, a projection rebuild — with
 * kld's peak RSS. In the same run, the peers: a static file server of the
 * same bytes for GET, `jq` over the file for the queries, and terraform's
 * own `pg` backend for `terraform state push` (same PostgreSQL). Prints
 * figures; never fails on a miss.
 *
 *   npm run bench:ladder
 *   KL_BENCH_SIZES=1000,10000,20000,100000   instances (approximately: 2 × size + 8)
 *   KL_BENCH_DELTAS=10  KL_BENCH_GET_REPS=5  KL_BENCH_SKIP_TERRAFORM=1
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

async function main(): Promise<void> {
  const logger = pino({ level: 'warn' }, pino.destination(2));
  process.once('SIGINT', () => void cleanup().finally(() => process.exit(130)));
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-bench-ladder-'));
  undo.push(() => fs.rmSync(tmp, { recursive: true, force: true }));
  if (!process.env.KL_BENCH_DATABASE_URL) {
    // A directory of its own: the server may run as another OS user.
    const pgDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-bench-ladder-pg-'));
    undo.push(() => fs.rmSync(pgDir, { recursive: true, force: true }));
    const pg = await EmbeddedPostgres.start(pgDir, logger);
    undo.push(() => pg.stop());
    process.env.KL_BENCH_DATABASE_URL = pg.url;
  }
  const serverUrl = process.env.KL_BENCH_DATABASE_URL;
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
  const db = await openBenchDatabase(logger);
  const kld = await startKld(KLD, db.url, path.join(dir, 'kld'));
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const cells: Record<string, string> = {};
  console.log(
    `\n${formatInt(big.instanceCount)} instances, ${mib(big.text.length)}: kld pid ${kld.pid}`,
  );
  try {
    const stateUrl = `${kld.url}/v1/states/${STATE_NAME}`;
    const cpu0 = processCpuMs(kld.pid);
    const full = await send(agent, 'POST', stateUrl, Buffer.from(big.text));
    cells.full = `${formatMs(full.ms)} ms (kld CPU ${formatMs(processCpuMs(kld.pid) - cpu0)} ms)`;

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
    for (let i = 0; i < DELTAS; i++) one.push(await delta(1, i));
    const ten: number[] = [];
    for (let i = 0; i < Math.max(1, Math.floor(DELTAS / 3)); i++)
      ten.push(await delta(10, 1000 + i));
    cells.delta1 = spread(one);
    cells.delta10 = spread(ten);
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

    for (const q of QUERIES) {
      const ours: number[] = [];
      for (let i = 0; i < 3; i++) {
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
      const jq = await timedJq(q.jq, file);
      cells[q.key] = `${formatMs(distribution(ours).p50)} ms (jq ${jq})`;
    }

    const rebuildCpu0 = processCpuMs(kld.pid);
    const rebuild = await send(
      agent,
      'POST',
      `${kld.url}/v1/admin/projections/rebuild`,
      Buffer.from('{}'),
    );
    if (rebuild.status !== 200) throw new Error(`rebuild: ${rebuild.status} ${rebuild.body}`);
    cells.rebuild = `${formatMs(rebuild.ms)} ms (kld CPU ${formatMs(processCpuMs(kld.pid) - rebuildCpu0)} ms)`;
    cells.rss = `${formatInt(peakRssMib(kld.pid))} MiB`;

    if (!SKIP_TERRAFORM) {
      const tf = await terraformPushes(dir, serverUrl, kld.url, big.text, current);
      cells.push = tf.first;
      cells.pushNext = tf.next;
    }
    staticServer.child.kill('SIGTERM');
  } finally {
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
  ['push', 'state push -force, empty (pg)'],
  ['pushNext', 'state push -force, next serial (pg)'],
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

function timedJq(filter: string, file: string): Promise<string> {
  return new Promise((resolve) => {
    const startedAt = performance.now();
    execFile('jq', ['-c', filter, file], { maxBuffer: 1 << 30 }, (err) =>
      resolve(err ? 'failed' : `${formatMs(performance.now() - startedAt)} ms`),
    );
  });
}

/** VmHWM: the most resident memory kld had at any time. */
function peakRssMib(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? NaN);
  return kb / 1024;
}

/**
 * `terraform state push -force` of the document into an empty workspace and
 * of the next serial (changed instances) over it, to the pg backend and to
 * kld's http backend, alternating, same file each.
 */
async function terraformPushes(
  dir: string,
  serverUrl: string,
  kldUrl: string,
  first: string,
  next: string,
): Promise<{ first: string; next: string }> {
  const rc = path.join(dir, 'terraformrc');
  fs.writeFileSync(rc, '# empty: the pg and http backends are built in\n');
  const env = {
    ...process.env,
    TF_CLI_CONFIG_FILE: rc,
    CHECKPOINT_DISABLE: '1',
    TF_IN_AUTOMATION: '1',
    TF_INPUT: '0',
  };
  const dbName = `kl_bench_tfpg_${randomBytes(4).toString('hex')}`;
  await adminQuery(serverUrl, `CREATE DATABASE ${dbName}`);
  undo.push(() => adminQuery(serverUrl, `DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`));
  const conn = new URL(serverUrl);
  conn.pathname = `/${dbName}`;
  conn.searchParams.set('sslmode', 'disable');
  const backends = {
    pg: `terraform {\n  backend "pg" {\n    conn_str = ${JSON.stringify(conn.toString())}\n  }\n}\n`,
    http: `terraform {\n${httpBackend(kldUrl, 'bench/terraform-http')}}\n`,
  };
  const firstFile = path.join(dir, 'push-1.tfstate');
  const nextFile = path.join(dir, 'push-2.tfstate');
  fs.writeFileSync(firstFile, first);
  fs.writeFileSync(nextFile, next);
  const ms: Record<string, number[]> = { pg: [], http: [] };
  for (const kind of ['pg', 'http'] as const) {
    const cwd = path.join(dir, `tf-${kind}`);
    fs.mkdirSync(cwd);
    fs.writeFileSync(path.join(cwd, 'main.tf'), backends[kind]);
    await terraform(cwd, env, ['init', '-input=false', '-no-color']);
  }
  for (const f of [firstFile, nextFile]) {
    for (const kind of ['pg', 'http'] as const) {
      const cwd = path.join(dir, `tf-${kind}`);
      ms[kind].push(await terraform(cwd, env, ['state', 'push', '-force', '-no-color', f]));
    }
  }
  const cell = (i: number) =>
    `${formatMs(ms.http[i])} ms (pg ${formatMs(ms.pg[i])}, ${(ms.http[i] / ms.pg[i]).toFixed(2)}×)`;
  return { first: cell(0), next: cell(1) };
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
