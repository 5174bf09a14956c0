import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { openBenchDatabase } from './support/bench-database';
import { send } from './support/http-send';
import { Kld, killAll, startKld } from './support/refresh-processes';
import { printMachine, printTable } from './support/report';
import { SyntheticState } from './support/state-generator';
import { distribution, formatInt, formatMs } from './support/stats';

/**
 * kld's one thread during heavy requests (wave 21): while kld answers one
 * heavy request, a second client asks `/healthz` every 10 ms (answered in
 * process: its wait is what kld's event loop made it wait), and kld itself
 * records its event-loop delay (bench/support/loop-delay-preload, node's
 * monitorEventLoopDelay) and its garbage collector's pauses. Per operation,
 * the slowest /healthz, the longest loop delay and the longest GC pause, for this build and (KL_BENCH_KLD_BEFORE=<other
 * kld.js>) another, each kld on its own database, the builds taking turns
 * round by round. Operations, on a state of KL_BENCH_BIG_STATE instances
 * (20,000; SyntheticState, one resource type):
 *
 *   POST state     the state written whole (terraform's push)
 *   GET state      the document served (terraform's pull)
 *   slice all      POST /v1/engine/states/…/slice of every instance
 *   scope+slice    POST …/scope of every instance, with its slice
 *   run start      a run of KL_BENCH_GLOBS (10,000) globs
 *   409 holders    a run asking the same globs: refused, every holder listed
 *   heartbeat      the first run's heartbeat
 *   query rows     POST /v1/query answering KL_BENCH_QUERY_ROWS (100,000) rows
 *                  of 500 characters (wave 24)
 *
 * KL_BENCH_OPERATIONS (a comma-separated list of the names above) measures
 * those only; the state's operations run unmeasured when any of them is chosen.
 * Prints figures; never fails on a miss.
 *
 *   npm run bench:event-loop
 *   KL_BENCH_BIG_STATE=20000  KL_BENCH_GLOBS=10000  KL_BENCH_ROUNDS=5
 *   KL_BENCH_KLD_BEFORE=/work/wt/base/dist/src/kld.js
 */

const BIG_STATE = Number(process.env.KL_BENCH_BIG_STATE ?? 20_000);
const GLOBS = Number(process.env.KL_BENCH_GLOBS ?? 10_000);
const ROUNDS = Number(process.env.KL_BENCH_ROUNDS ?? 5);
const QUERY_ROWS = Number(process.env.KL_BENCH_QUERY_ROWS ?? 100_000);
const OPERATIONS = process.env.KL_BENCH_OPERATIONS?.split(',').map((o) => o.trim());
const chosen = (operation: string) => OPERATIONS === undefined || OPERATIONS.includes(operation);
const HEALTH_EVERY_MS = 10;
const ROOT = path.resolve(__dirname, '../..');
const BUILDS: [string, string][] = [['this build', path.join(ROOT, 'dist/src/kld.js')]];
if (process.env.KL_BENCH_KLD_BEFORE) BUILDS.push(['before', process.env.KL_BENCH_KLD_BEFORE]);
const PRELOAD = path.join(__dirname, 'support/loop-delay-preload.js');

interface Held {
  build: string;
  operation: string;
  ms: number;
  healthMaxMs: number;
  loopMaxMs: number;
  /** The longest garbage-collection pause meanwhile: a hold no piece-per-turn can split. */
  gcMaxMs: number;
}

/** The longest event-loop delay and GC pause kld saw since the last call (the preload's file). */
async function loopDelay(kld: Kld, out: string): Promise<{ loopMaxMs: number; gcMaxMs: number }> {
  const file = `${out}.${kld.pid}`;
  fs.rmSync(file, { force: true });
  process.kill(kld.pid, 'SIGUSR2');
  for (let i = 0; i < 600; i++) {
    if (fs.existsSync(file)) {
      const text = fs.readFileSync(file, 'utf8');
      if (text !== '') {
        const [loopMaxMs, gcMaxMs] = text.split(' ').map(Number);
        return { loopMaxMs, gcMaxMs };
      }
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error('kld did not report its loop delay within 3 s');
}

/**
 * `operation` while /healthz is asked every HEALTH_EVERY_MS on a connection
 * of its own: the operation's round trip, the slowest /healthz, and kld's
 * longest loop delay meanwhile.
 */
async function probed(
  kld: Kld,
  out: string,
  build: string,
  operation: string,
  run: () => Promise<{ ms: number }>,
): Promise<Held> {
  await loopDelay(kld, out);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  let done = false;
  const health: number[] = [];
  const asking = (async () => {
    while (!done) {
      const r = await send(agent, 'GET', `${kld.url}/healthz`);
      if (r.status !== 200) throw new Error(`/healthz: ${r.status}`);
      health.push(r.ms);
      await new Promise((resolve) => setTimeout(resolve, HEALTH_EVERY_MS));
    }
  })();
  try {
    const { ms } = await run();
    done = true;
    await asking;
    return {
      build,
      operation,
      ms,
      healthMaxMs: Math.max(...health),
      ...(await loopDelay(kld, out)),
    };
  } finally {
    done = true;
    agent.destroy();
  }
}

const json = (v: unknown) => Buffer.from(JSON.stringify(v));

async function must(
  agent: http.Agent,
  method: string,
  url: string,
  body: Buffer | undefined,
  want: number,
) {
  const r = await send(agent, method, url, body);
  if (r.status !== want) throw new Error(`${method} ${url}: ${r.status} ${r.body.slice(0, 300)}`);
  return r;
}

function globs(run: string, n: number): string[] {
  return Array.from({ length: n }, (_, i) => `module.m${i % 50}.aws_instance.${run}${i}[0]`);
}

async function round(kld: Kld, out: string, build: string, n: number): Promise<Held[]> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const held: Held[] = [];
  const at = async (operation: string, run: () => Promise<{ ms: number }>) => {
    // One not chosen still runs when a chosen one needs what it leaves (the 409 the run).
    if (chosen(operation)) held.push(await probed(kld, out, build, operation, run));
    else await run();
  };
  try {
    const sql = `SELECT g, repeat('x', 500) AS pad FROM generate_series(1, ${QUERY_ROWS}) g`;
    if (chosen('query rows')) {
      await at('query rows', () =>
        must(agent, 'POST', `${kld.url}/v1/query`, json({ sql, max_rows: QUERY_ROWS }), 200),
      );
    }
    const stateless = ['query rows'];
    if (OPERATIONS !== undefined && OPERATIONS.every((o) => stateless.includes(o))) return held;
    const name = `bench/loop-${n}`;
    const state = `${kld.url}/v1/states/${name}`;
    const text = Buffer.from(new SyntheticState({ instances: BIG_STATE, seed: n }).text());
    await at('POST state', () => must(agent, 'POST', state, text, 200));
    // What the POST left behind (snapshot, served copy) is not the next operation's.
    await new Promise((r) => setTimeout(r, 2000));
    await at('GET state', () => must(agent, 'GET', state, undefined, 200));
    const all = json({ selectors: [{ type: 'terraform_data' }] });
    const engine = `${kld.url}/v1/engine/states/${name}`;
    await at('slice all', () => must(agent, 'POST', `${engine}/slice`, all, 200));
    const scope = json({ selectors: [{ type: 'terraform_data' }], slice: true });
    await at('scope+slice', () => must(agent, 'POST', `${engine}/scope`, scope, 200));
    const runs = `${kld.url}/v1/api/states/${name}/apply-runs`;
    const write = globs('a', GLOBS);
    let runId = '';
    await at('run start', async () => {
      const r = await must(
        agent,
        'POST',
        runs,
        json({ base_version: 1, write, lease_seconds: 3600 }),
        201,
      );
      runId = (JSON.parse(r.body) as { run_id: string }).run_id;
      return r;
    });
    await at('409 holders', () =>
      must(agent, 'POST', runs, json({ base_version: 1, write, lease_seconds: 60 }), 409),
    );
    await at('heartbeat', () =>
      must(agent, 'POST', `${runs}/${runId}/heartbeat`, json({ lease_seconds: 3600 }), 200),
    );
    await must(agent, 'POST', `${kld.url}/v1/api/apply-runs/${runId}/abort`, json({}), 200);
    return held;
  } finally {
    agent.destroy();
  }
}

async function main(): Promise<void> {
  console.log(
    `kld's thread during heavy requests: /healthz every ${HEALTH_EVERY_MS} ms beside each, ` +
      `${formatInt(BIG_STATE)} instances, ${formatInt(GLOBS)} globs, ${ROUNDS} rounds`,
  );
  printMachine();
  const logger = pino({ level: 'warn' });
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-bench-event-loop-'));
  const out = path.join(work, 'loop-delay');
  process.env.KL_PROBE_LOOP_OUT = out;
  process.env.KL_BENCH_KLD_NODE_ARGS =
    `${process.env.KL_BENCH_KLD_NODE_ARGS ?? ''} -r ${PRELOAD}`.trim();
  const undo: (() => Promise<void> | void)[] = [() => fs.rmSync(work, { recursive: true })];
  const held: Held[] = [];
  try {
    const klds: { label: string; kld: Kld }[] = [];
    for (const [label, kldJs] of BUILDS) {
      // Another build's kld migrates its own database: it refuses a migration it does not know.
      const db = await openBenchDatabase(logger, { migrate: label === 'this build' });
      undo.push(() => db.close());
      const kld = await startKld(kldJs, db.url, path.join(work, label.replace(/\W/g, '-')));
      undo.push(() => kld.stop());
      klds.push({ label, kld });
    }
    for (let n = 1; n <= ROUNDS; n++) {
      // The builds take turns, the first one first in odd rounds only.
      for (const { label, kld } of n % 2 === 1 ? klds : [...klds].reverse()) {
        const figures = await round(kld, out, label, n);
        held.push(...figures);
        console.log(
          `  ${label} round ${n}: ` +
            figures
              .map(
                (f) =>
                  `${f.operation} ${formatMs(f.healthMaxMs)}/${formatMs(f.loopMaxMs)}/` +
                  formatMs(f.gcMaxMs),
              )
              .join(', ') +
            ' (slowest /healthz / loop delay / GC pause, ms)',
        );
      }
    }
  } finally {
    while (undo.length) await Promise.resolve(undo.pop()!()).catch(() => undefined);
    await killAll();
  }
  const span = (v: number[]) => {
    const d = distribution(v);
    return `${formatMs(d.p50)} (${formatMs(d.min)}–${formatMs(d.max)})`;
  };
  console.log(`\nMedian (min–max) over ${ROUNDS} rounds, ms`);
  const operations = [...new Set(held.map((h) => h.operation))];
  printTable(
    ['operation', 'build', 'request', 'slowest /healthz', 'longest loop delay', 'longest GC'],
    operations.flatMap((operation) =>
      BUILDS.map(([build]) => {
        const of = held.filter((h) => h.operation === operation && h.build === build);
        return [
          operation,
          build,
          span(of.map((h) => h.ms)),
          span(of.map((h) => h.healthMaxMs)),
          span(of.map((h) => h.loopMaxMs)),
          span(of.map((h) => h.gcMaxMs)),
        ];
      }),
    ),
  );
}

main().catch(async (err) => {
  console.error(err);
  await killAll();
  process.exit(1);
});
