import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { openBenchDatabase, openBenchServer } from './support/bench-database';
import { generateBigState } from './support/big-state-generator';
import { SyntheticState } from './support/state-generator';
import { Kld, killAll, sql, startKld } from './support/refresh-processes';
import { printMachine, printTable } from './support/report';
import { distribution, formatInt, formatMs } from './support/stats';
import { DatabaseCpuMeter, processCpuMs, processCpuSplit } from './support/process-cpu';
import { send } from './support/http-send';
import { walInsertPosition } from './support/wal-position';

/**
 * The first commit of a big state (issue 14): a full POST of the big-state
 * example into an empty state, then a projection rebuild, on one or two
 * builds of kld side by side, each on its own database of one embedded
 * PostgreSQL. The builds take turns, one POST each, so a busy machine slows
 * both alike; for each the minimum over the rounds of the wall time (the
 * server time: kld is on this host), kld's CPU time and PostgreSQL's CPU time
 * (the backends serving its database) per POST, PostgreSQL's CPU from a POST
 * until that build's next one (so with what kld starts after answering, the
 * statistics refresh), the WAL the whole server wrote during each POST, and
 * kld's peak RSS.
 *
 *   npm run bench:first-commit
 *   KL_BENCH_INSTANCES=20000   instances (approximately: 2 × size + 8)
 *   KL_BENCH_STATE=wide        bench:state-backend's document (the same count of instances,
 *                              about twice as many bytes each) instead of the big-state example
 *   KL_BENCH_ROUNDS=3          full POSTs per build, each into a new state
 *   KL_BENCH_KLD=path/to/kld.js          the build measured (default: this one)
 *   KL_BENCH_KLD_BEFORE=path/to/kld.js   a second build taking turns with it
 *   KL_BENCH_KLD_NODE_ARGS="--cpu-prof --cpu-prof-dir=DIR" (node options for kld)
 *   KL_BENCH_REBUILD=0         no projection rebuild
 *   KL_BENCH_IDLE_MS=0         a pause before each round after the first (kld idle, as between
 *                              two pushes of an operator: longer than the pool's idle timeout)
 *   KL_BENCH_PG_LOG_MS=100     print the embedded PostgreSQL's statements slower than that
 *   KL_BENCH_PG_STATS=1        with it, each statement's backend CPU too (log_statement_stats)
 *   KL_UNLOGGED_READ_MODELS=on  kld's own setting: its read models without WAL (the bench's
 *                              databases are not embedded ones, so kld keeps them logged by default)
 */

const INSTANCES = Number(process.env.KL_BENCH_INSTANCES ?? 20_000);
const ROUNDS = Number(process.env.KL_BENCH_ROUNDS ?? 3);
const ROOT = path.resolve(__dirname, '../..');
const BUILDS: [string, string][] = [
  ['this build', process.env.KL_BENCH_KLD ?? path.join(ROOT, 'dist/src/kld.js')],
];
if (process.env.KL_BENCH_KLD_BEFORE) BUILDS.push(['before', process.env.KL_BENCH_KLD_BEFORE]);
const REBUILD = process.env.KL_BENCH_REBUILD !== '0';
const IDLE_MS = Number(process.env.KL_BENCH_IDLE_MS ?? 0);

const undo: (() => Promise<void> | void)[] = [];

async function cleanup(): Promise<void> {
  // kld first, stopped gently (a profiling kld writes its profile on the way out)
  while (undo.length) await Promise.resolve(undo.pop()!()).catch(() => undefined);
  await killAll();
}

interface Sample {
  ms: number;
  kldCpu: number;
  /** Of kldCpu: the main thread's, and the system time (all threads). */
  kldMain: number;
  kldSystem: number;
  pgCpu: number;
  /** WAL the server wrote during the request (every database: the other build's work too). */
  walMiB: number;
  /**
   * PostgreSQL's CPU for the database from the POST until that kld's next
   * POST (or 15 s after the last one): with the statistics refresh
   * (VACUUM (ANALYZE)) kld starts once the commit is projected.
   */
  pgCpuSettled?: number;
}

async function main(): Promise<void> {
  const slowMs = process.env.KL_BENCH_PG_LOG_MS;
  const logger = pino({ level: slowMs ? 'debug' : 'warn' }, pino.destination(2));
  process.once('SIGINT', () => void cleanup().finally(() => process.exit(130)));
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-bench-first-'));
  undo.push(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const server = await openBenchServer(logger, undo, 'kl-bench-first');
  const postmaster = server.postmaster;
  // Only on the embedded server: a given one is not the bench's to reconfigure.
  if (postmaster !== null && slowMs) {
    await sql(server.url, `ALTER SYSTEM SET log_min_duration_statement = ${Number(slowMs)}`);
    if (process.env.KL_BENCH_PG_STATS === '1') {
      await sql(server.url, 'ALTER SYSTEM SET log_statement_stats = on');
    }
    await sql(server.url, 'SELECT pg_reload_conf()');
  }
  const state = benchState();
  const body = Buffer.from(state.text);
  console.log('First commit: full POST into an empty state, then a projection rebuild');
  printMachine();
  console.log(
    `  state (${state.name}): ${formatInt(state.instanceCount)} instances, ` +
      `${(body.length / 2 ** 20).toFixed(1)} MiB; ${ROUNDS} rounds; postgres pid ${postmaster ?? '-'}`,
  );
  const klds: {
    label: string;
    kld: Kld;
    meter: DatabaseCpuMeter | null;
    agent: http.Agent;
    posts: Sample[];
    rebuild?: Sample;
    /** PostgreSQL's CPU for its database when its last POST began. */
    pgAtPost?: number;
  }[] = [];
  for (const [label, kldJs] of BUILDS) {
    // Another build's kld migrates its own database: it refuses a migration it does not know.
    const db = await openBenchDatabase(logger, { migrate: label === 'this build' });
    undo.push(() => db.close());
    const kld = await startKld(kldJs, db.url, path.join(tmp, label.replace(/\W/g, '-')));
    undo.push(() => kld.stop());
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    undo.push(() => agent.destroy());
    const database = new URL(db.url).pathname.slice(1);
    const meter = postmaster ? new DatabaseCpuMeter(postmaster, database) : null;
    undo.push(() => meter?.stop());
    klds.push({ label, kld, meter, agent, posts: [] });
  }
  const measure = async (
    k: (typeof klds)[number],
    method: string,
    url: string,
    payload?: Buffer,
  ) => {
    const kld0 = processCpuMs(k.kld.pid);
    const split0 = processCpuSplit(k.kld.pid);
    const pg0 = k.meter?.totalMs() ?? NaN;
    const wal0 = await walInsertPosition(k.kld.databaseUrl);
    const r = await send(k.agent, method, url, payload);
    const walMiB = Number((await walInsertPosition(k.kld.databaseUrl)) - wal0) / 2 ** 20;
    if (r.status !== 200) throw new Error(`${method} ${url}: ${r.status} ${r.body.slice(0, 300)}`);
    const split = processCpuSplit(k.kld.pid);
    return {
      ms: r.ms,
      kldCpu: processCpuMs(k.kld.pid) - kld0,
      kldMain: split.main - split0.main,
      kldSystem: split.system - split0.system,
      pgCpu: (k.meter?.totalMs() ?? NaN) - pg0,
      walMiB,
    };
  };
  const settle = (k: (typeof klds)[number]) => {
    const pg = k.meter?.totalMs() ?? NaN;
    const last = k.posts[k.posts.length - 1];
    if (last && k.pgAtPost !== undefined) last.pgCpuSettled = pg - k.pgAtPost;
    k.pgAtPost = pg;
  };
  for (let round = 1; round <= ROUNDS; round++) {
    if (round > 1 && IDLE_MS > 0) await new Promise((r) => setTimeout(r, IDLE_MS));
    for (const k of klds) {
      settle(k);
      const s = await measure(k, 'POST', `${k.kld.url}/v1/states/bench/first-${round}`, body);
      k.posts.push(s);
      console.log(
        `  round ${round} ${k.label}: ${formatMs(s.ms)} ms, kld CPU ${formatMs(s.kldCpu)} ms ` +
          `(main thread ${formatMs(s.kldMain)}, system ${formatMs(s.kldSystem)}), postgres CPU ${formatMs(s.pgCpu)} ms, ` +
          `WAL ${s.walMiB.toFixed(1)} MiB`,
      );
    }
  }
  await new Promise((r) => setTimeout(r, 15_000));
  for (const k of klds) settle(k);
  for (const k of klds) {
    console.log(
      `  ${k.label}: postgres CPU per POST until the next (incl. the VACUUM (ANALYZE) after): ` +
        k.posts.map((s) => `${formatMs(s.pgCpuSettled ?? NaN)} ms`).join(' / '),
    );
  }
  for (const k of REBUILD ? klds : []) {
    k.rebuild = await measure(
      k,
      'POST',
      `${k.kld.url}/v1/admin/projections/rebuild`,
      Buffer.from('{}'),
    );
  }
  const min = (xs: number[]) => Math.min(...xs);
  const cell = (s: Sample) =>
    `${formatMs(s.ms)} ms (kld ${formatMs(s.kldCpu)}, pg ${formatMs(s.pgCpu)} ms CPU)`;
  console.log(
    `\nload now ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} (1/5/15 min)`,
  );
  printTable(
    [
      'build',
      'full POST, min wall',
      'min kld CPU',
      'min postgres CPU',
      'min postgres CPU incl. after',
      'median WAL',
      `rebuild (${ROUNDS} states)`,
      'kld peak RSS',
    ],
    klds.map((k) => [
      k.label,
      `${formatMs(min(k.posts.map((s) => s.ms)))} ms`,
      `${formatMs(min(k.posts.map((s) => s.kldCpu)))} ms`,
      `${formatMs(min(k.posts.map((s) => s.pgCpu)))} ms`,
      `${formatMs(min(k.posts.map((s) => s.pgCpuSettled ?? NaN)))} ms`,
      `${distribution(k.posts.map((s) => s.walMiB)).p50.toFixed(1)} MiB`,
      k.rebuild ? cell(k.rebuild) : '-',
      `${formatInt(peakRssMib(k.kld.pid))} MiB`,
    ]),
  );
}

/**
 * The document posted: the big-state example (the ladder's), or with
 * KL_BENCH_STATE=wide bench:state-backend's synthetic state, whose instances
 * carry their input twice (input and output) and are about twice as wide.
 */
function benchState(): { name: string; text: string; instanceCount: number } {
  const kind = process.env.KL_BENCH_STATE ?? 'big';
  if (kind === 'wide') {
    const wide = new SyntheticState({ instances: INSTANCES });
    return { name: 'bench:state-backend', text: wide.text(), instanceCount: wide.instanceCount };
  }
  if (kind !== 'big') throw new Error(`KL_BENCH_STATE: big or wide, got ${kind}`);
  const big = generateBigState({ size: Math.max(1, Math.round((INSTANCES - 8) / 2)) });
  return { name: 'big-state example', text: big.text, instanceCount: big.instanceCount };
}

/** VmHWM: the most resident memory kld had at any time. */
function peakRssMib(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024;
}

main()
  .then(cleanup)
  .catch(async (err: unknown) => {
    console.error(err);
    await cleanup();
    process.exit(1);
  });
