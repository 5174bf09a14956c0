import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { openBenchDatabase, openBenchServer } from './support/bench-database';
import { postSyntheticState, send } from './support/http-send';
import { ActivitySampler } from './support/pg-activity';
import { processCpuMs } from './support/process-cpu';
import { Kld, killAll, sql, startKld } from './support/refresh-processes';
import { printMachine, printTable } from './support/report';
import { SMALL_STATE } from './support/state-generator';
import { formatInt, formatMs } from './support/stats';

/**
 * What a big commit leaves other callers waiting for (wave 21): a POST of a
 * new KL_BENCH_BIG_STATE-instance state, and the moment it answered, a 2-glob
 * `POST …/apply-runs` on a small OTHER state (then aborted), then one on the
 * big state itself. Beside them `/healthz` every 10 ms (answered in process:
 * its delay is kld's event loop), and `pg_stat_activity` of the bench's
 * databases sampled every 20 ms: what PostgreSQL was doing while the start
 * waited (IO, WALWrite, a lock, or CPU). The embedded server logs statements
 * slower than KL_BENCH_PG_LOG_MS and lock waits; those in the start's window
 * are printed. With KL_BENCH_KLD_BEFORE=<other kld.js> the other build runs
 * too, each with its own database on the same server, taking turns round by
 * round (KL_BENCH_KLDS=label=kld.js,… adds more). Prints figures; never fails on a miss.
 *
 *   npm run build && KL_UNLOGGED_READ_MODELS=on node dist/bench/after-big.js
 *   KL_BENCH_BIG_STATE=20000  KL_BENCH_ROUNDS=3  KL_BENCH_PG_LOG_MS=50  KL_BENCH_QUIET=1 (no detail)
 */

const BIG_STATE = Number(process.env.KL_BENCH_BIG_STATE ?? 20_000);
const ROUNDS = Number(process.env.KL_BENCH_ROUNDS ?? 3);
const PG_LOG_MS = Number(process.env.KL_BENCH_PG_LOG_MS ?? 50);
const QUIET = process.env.KL_BENCH_QUIET === '1';
const ROOT = path.resolve(__dirname, '../..');
const BUILDS: [string, string][] = [['this build', path.join(ROOT, 'dist/src/kld.js')]];
const before = process.env.KL_BENCH_KLD_BEFORE;
if (before) BUILDS.push(['before', before]);
// More builds to take turns with, e.g. copies with one thing taken out: label=path,label=path.
for (const b of (process.env.KL_BENCH_KLDS ?? '').split(',').filter(Boolean)) {
  const [label, kldJs] = b.split('=');
  BUILDS.push([label, kldJs]);
}
const SMALL = 'bench/small-other';

interface Figure {
  build: string;
  postMs: number;
  otherMs: number;
  otherCpu: number;
  bigMs: number;
  healthMaxMs: number;
}

/** PostgreSQL's log lines (slow statements, lock waits), with when they came. */
const pgLog: { at: number; line: string }[] = [];

const json = (v: unknown) => Buffer.from(JSON.stringify(v));

/** /healthz one after another until `stop`: the slowest answer. */
async function healthLoop(kld: Kld, stop: { done: boolean }): Promise<number> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  let max = 0;
  try {
    while (!stop.done) {
      const r = await send(agent, 'GET', `${kld.url}/healthz`);
      max = Math.max(max, r.ms);
      await new Promise((res) => setTimeout(res, 10));
    }
  } finally {
    agent.destroy();
  }
  return max;
}

async function round(
  kld: Kld,
  build: string,
  n: number,
  allSampler: ActivitySampler,
): Promise<Figure> {
  // A fresh connection: one idle past kld's keep-alive while the other builds ran may be closed.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    return await roundOn(kld, agent, build, n, allSampler);
  } finally {
    agent.destroy();
  }
}

async function roundOn(
  kld: Kld,
  agent: http.Agent,
  build: string,
  n: number,
  allSampler: ActivitySampler,
): Promise<Figure> {
  const name = `bench/big-${n}`;
  const posted = await postSyntheticState(agent, kld.url, name, BIG_STATE, n);
  const from = allSampler.now();
  const stop = { done: false };
  const health = healthLoop(kld, stop);
  const write = ['terraform_data.x[1]', 'terraform_data.x[2]'];
  const start = async (state: string) => {
    const cpu0 = processCpuMs(kld.pid);
    const r = await send(
      agent,
      'POST',
      `${kld.url}/v1/api/states/${state}/apply-runs`,
      json({ base_version: 1, write }),
    );
    const cpu = processCpuMs(kld.pid) - cpu0;
    if (r.status !== 201) throw new Error(`start ${state}: ${r.status} ${r.body.slice(0, 300)}`);
    const runId = (JSON.parse(r.body) as { run_id: string }).run_id;
    const a = await send(agent, 'POST', `${kld.url}/v1/api/apply-runs/${runId}/abort`, json({}));
    if (a.status !== 200) throw new Error(`abort: ${a.status} ${a.body.slice(0, 300)}`);
    return { ms: r.ms, cpu };
  };
  const other = await start(SMALL);
  const to = allSampler.now();
  const big = await start(name);
  stop.done = true;
  const healthMaxMs = await health;
  if (!QUIET) {
    console.log(
      `  ${build} round ${n}: POST ${formatMs(posted.ms)} ms; other state's start ` +
        `${formatMs(other.ms)} ms (kld CPU ${formatMs(other.cpu)}); big state's start ` +
        `${formatMs(big.ms)} ms; slowest /healthz ${formatMs(healthMaxMs)} ms`,
    );
    console.log(
      allSampler
        .summary(from, to)
        .split('\n')
        .map((l) => `    ${l}`)
        .join('\n'),
    );
    for (const l of pgLog.filter((l) => l.at >= from - 50 && l.at <= to + 50)) {
      console.log(`    pg +${Math.round(l.at - from)} ms: ${l.line.slice(0, 200)}`);
    }
  }
  // Let the commit's after-work (statistics, snapshot) end before the next build's turn.
  await new Promise((r) => setTimeout(r, 3000));
  return {
    build,
    postMs: posted.ms,
    otherMs: other.ms,
    otherCpu: other.cpu,
    bigMs: big.ms,
    healthMaxMs,
  };
}

async function main(): Promise<void> {
  const logger = pino(
    { level: 'debug' },
    {
      write(msg: string) {
        const o = JSON.parse(msg) as { postgres?: string; level: number; msg: string };
        if (o.postgres && /duration:|lock|checkpoint/.test(o.postgres)) {
          pgLog.push({ at: performance.now(), line: o.postgres });
        } else if (!o.postgres && o.level >= 40) process.stderr.write(msg);
      },
    },
  );
  const undo: (() => Promise<void> | void)[] = [];
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-bench-after-big-'));
  undo.push(() => fs.rmSync(work, { recursive: true, force: true }));
  const figures: Figure[] = [];
  try {
    const server = await openBenchServer(logger, undo, 'kl-bench-after-big');
    if (server.postmaster !== null) {
      await sql(server.url, `ALTER SYSTEM SET log_min_duration_statement = ${PG_LOG_MS}`);
      await sql(server.url, 'ALTER SYSTEM SET log_lock_waits = on');
      await sql(server.url, 'ALTER SYSTEM SET log_autovacuum_min_duration = 0');
      await sql(server.url, 'SELECT pg_reload_conf()');
    }
    console.log(`A small run's start right after a POST of ${formatInt(BIG_STATE)} instances`);
    printMachine();
    const klds: { label: string; kld: Kld; sampler: ActivitySampler }[] = [];
    for (const [label, kldJs] of BUILDS) {
      const db = await openBenchDatabase(logger, { migrate: label === 'this build' });
      undo.push(() => db.close());
      const kld = await startKld(kldJs, db.url, path.join(work, label.replace(/\W/g, '-')));
      undo.push(() => kld.stop());
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      undo.push(() => agent.destroy());
      const small = await send(agent, 'POST', `${kld.url}/v1/states/${SMALL}`, json(SMALL_STATE));
      if (small.status !== 200) throw new Error(`POST ${SMALL}: ${small.status} ${small.body}`);
      const own = await ActivitySampler.start(db.url);
      undo.push(() => own.stop());
      klds.push({ label, kld, sampler: own });
    }
    for (let n = 1; n <= ROUNDS; n++) {
      for (const k of n % 2 === 1 ? klds : [...klds].reverse()) {
        figures.push(await round(k.kld, k.label, n, k.sampler));
      }
    }
  } finally {
    while (undo.length) await Promise.resolve(undo.pop()!()).catch(() => undefined);
    await killAll();
  }
  const stats = (build: string, f: (x: Figure) => number) => {
    const v = figures
      .filter((x) => x.build === build)
      .map(f)
      .sort((a, b) => a - b);
    if (v.length === 0) return '-';
    return `${formatMs(v[Math.floor((v.length - 1) / 2)])} (${formatMs(v[0])}–${formatMs(v[v.length - 1])})`;
  };
  console.log(`\nMedian (min–max) of ${ROUNDS} rounds`);
  printTable(
    ['build', 'POST ms', 'other state start ms', 'kld CPU ms', 'big state start ms', 'healthz ms'],
    BUILDS.map(([b]) => [
      b,
      stats(b, (f) => f.postMs),
      stats(b, (f) => f.otherMs),
      stats(b, (f) => f.otherCpu),
      stats(b, (f) => f.bigMs),
      stats(b, (f) => f.healthMaxMs),
    ]),
  );
}

main().catch(async (err) => {
  console.error(err);
  await killAll();
  process.exit(1);
});
