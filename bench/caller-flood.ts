import { ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { openBenchDatabase } from './support/bench-database';
import { startKld } from './support/kld-process';
import { ActivitySampler } from './support/pg-activity';
import { poolTraceArgs, summarizePoolTrace, takePoolTrace } from './support/pool-trace';
import { sql } from './support/refresh-processes';
import { SyntheticState } from './support/state-generator';
import { distribution, formatMs } from './support/stats';

/**
 * One caller floods a heavy surface of kld; another caller meanwhile runs
 * terraform's cycle on a small state (GET, LOCK, POST, UNLOCK) and a query
 * (`SELECT 1`). Prints how
 * long that cycle's requests took with no flood and under each flood, and
 * what the flood's own requests were answered (200, 429…). Never fails.
 *
 *   npm run build && node dist/bench/caller-flood.js
 *
 *   KL_BENCH_KLD=dist/src/kld.js    the build to measure (another build's, to compare)
 *   KL_BENCH_SIZE=20000             instances of the state the floods read
 *   KL_BENCH_CYCLES=5               terraform cycles measured under each flood
 *   KL_BENCH_KLD_ENV='KL_X=1 …'     extra variables for kld
 *   KL_BENCH_FLOODS=queries,exports  only the floods whose names start so
 *   KL_BENCH_RAW=1                  also every request's ms (JSON), to pool several runs
 *   KL_BENCH_WHY=1                  where the slowest request of each flood waited (wave 21):
 *                                   pg_stat_activity every 20 ms in its window (waits, idle
 *                                   transactions), PostgreSQL's log of statements slower than
 *                                   KL_BENCH_PG_LOG_MS (default 50) and of lock waits, and the
 *                                   slowest /healthz beside the cycles (kld's event loop);
 *                                   and from inside kld (pool-trace-preload, wave 22) each
 *                                   pool's connection waits and statements, the projector
 *                                   transactions in the window phase by phase, kld's loop delays
 */

const SIZE = intEnv('KL_BENCH_SIZE', 20_000);
const CYCLES = intEnv('KL_BENCH_CYCLES', 5);
const OP_TIMEOUT_MS = 30_000;
const FLOODER = 'flooder';
const WHY = process.env.KL_BENCH_WHY === '1';
const PG_LOG_MS = intEnv('KL_BENCH_PG_LOG_MS', 50);
/** PostgreSQL's log lines (slow statements, lock waits) with when they came (KL_BENCH_WHY). */
const pgLog: { at: number; line: string }[] = [];
/** The slowest request of the last cycles: which, and when (performance.now()). */
let slowest = { op: '', from: 0, to: 0 };

function intEnv(name: string, fallback: number): number {
  const v = process.env[name];
  return v ? Number(v) : fallback;
}

interface Flood {
  name: string;
  /** Starts the flood; resolves to the statuses of its requests once they all ended. */
  start(url: string): Promise<string[]>;
}

function statusCounts(statuses: string[]): string {
  const counts = new Map<string, number>();
  for (const s of statuses) counts.set(s, (counts.get(s) ?? 0) + 1);
  return [...counts].map(([s, n]) => `${n}×${s}`).join(' ');
}

async function settle(requests: Promise<string>[]): Promise<string[]> {
  return Promise.all(requests.map((p) => p.catch((e: Error) => `error ${e.message}`)));
}

const asFlooder = { 'X-Kilolock-Actor': FLOODER };

function queries(n: number, seconds: number): Flood {
  return {
    name: `${n} queries of pg_sleep(${seconds})`,
    start: (url) =>
      settle(
        Array.from({ length: n }, async () => {
          const r = await fetch(`${url}/v1/query`, {
            method: 'POST',
            headers: { ...asFlooder, 'Content-Type': 'application/json' },
            body: JSON.stringify({ sql: `SELECT pg_sleep(${seconds})`, timeout_ms: 60_000 }),
          });
          await r.arrayBuffer();
          return String(r.status);
        }),
      ),
  };
}

function archiveExports(n: number, read: boolean, holdMs: number): Flood {
  return {
    name: `${n} exports of the big state${read ? '' : `, never read (held ${holdMs / 1000} s)`}`,
    start: (url) =>
      settle(
        Array.from(
          { length: n },
          () =>
            new Promise<string>((resolve, reject) => {
              const req = http.get(`${url}/v1/archives/big`, { headers: asFlooder }, (res) => {
                if (read) {
                  res.resume();
                  res.on('end', () => resolve(String(res.statusCode)));
                } else {
                  res.pause();
                  setTimeout(() => {
                    req.destroy();
                    resolve(String(res.statusCode));
                  }, holdMs);
                }
              });
              req.on('error', reject);
            }),
        ),
      ),
  };
}

function subscriptions(n: number, holdMs: number): Flood {
  return {
    name: `${n} event subscriptions from the start (held ${holdMs / 1000} s)`,
    start: async (url) => {
      const t0 = performance.now();
      // When each admitted subscription was told it had caught up (ms from the flood's start).
      const caughtUp: number[] = [];
      const statuses = await settle(
        Array.from(
          { length: n },
          () =>
            new Promise<string>((resolve, reject) => {
              const req = http.get(
                `${url}/v1/events?follow=true`,
                { headers: asFlooder },
                (res) => {
                  let tail: string | null = '';
                  res.on('data', (chunk: Buffer) => {
                    if (tail === null) return;
                    const text = tail + chunk.toString('latin1');
                    if (text.includes('event: caught-up')) {
                      caughtUp.push(performance.now() - t0);
                      tail = null;
                    } else tail = text.slice(-20);
                  });
                  setTimeout(() => {
                    req.destroy();
                    resolve(String(res.statusCode));
                  }, holdMs);
                },
              );
              req.on('error', reject);
            }),
        ),
      );
      const d = distribution(caughtUp);
      console.log(
        `    ${caughtUp.length} subscriptions caught up after p50 ${formatMs(d.p50)} ` +
          `max ${formatMs(d.max)} ms`,
      );
      return statuses;
    },
  };
}

function scopes(n: number): Flood {
  return {
    name: `${n} scope+slice requests of every instance`,
    start: (url) =>
      settle(
        Array.from({ length: n }, async () => {
          const r = await fetch(`${url}/v1/engine/states/big/scope`, {
            method: 'POST',
            headers: { ...asFlooder, 'Content-Type': 'application/json' },
            body: JSON.stringify({ selectors: [{ type: 'terraform_data' }], slice: true }),
          });
          await r.arrayBuffer();
          return String(r.status);
        }),
      ),
  };
}

/** Terraform's cycle on `small` as another caller: each request's ms (or its failure). */
async function cycles(url: string, small: SyntheticState): Promise<Record<string, number[]>> {
  const times: Record<string, number[]> = { GET: [], LOCK: [], POST: [], UNLOCK: [], QUERY: [] };
  const auth = { Authorization: `Basic ${Buffer.from('terraform:x').toString('base64')}` };
  for (let i = 0; i < CYCLES; i++) {
    const id = `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
    const info = JSON.stringify({ ID: id, Operation: 'OperationTypeApply', Who: 'bench' });
    const step = async (op: string, method: string, target: string, body?: string) => {
      const t0 = performance.now();
      const r = await fetch(`${url}${target}`, {
        method,
        headers: { ...auth, 'Content-Type': 'application/json' },
        body,
        signal: AbortSignal.timeout(OP_TIMEOUT_MS),
      }).catch(() => null);
      await r?.arrayBuffer();
      if (r === null || r.status >= 300) throw new Error(`${op}: ${r?.status ?? 'timeout'}`);
      const t1 = performance.now();
      times[op]!.push(t1 - t0);
      if (t1 - t0 > slowest.to - slowest.from) slowest = { op, from: t0, to: t1 };
    };
    await step('GET', 'GET', '/v1/states/small');
    await step('LOCK', 'LOCK', '/v1/states/small', info);
    small.changeOne(i);
    small.serial++;
    await step('POST', 'POST', `/v1/states/small?ID=${id}`, small.text());
    await step('UNLOCK', 'UNLOCK', '/v1/states/small', info);
    await step('QUERY', 'POST', '/v1/query', JSON.stringify({ sql: 'SELECT 1' }));
  }
  return times;
}

function report(label: string, times: Record<string, number[]>): void {
  const cells = Object.entries(times).map(([op, t]) => {
    const d = distribution(t);
    return `${op} p50 ${formatMs(d.p50)} max ${formatMs(d.max)}`;
  });
  console.log(`  ${label.padEnd(58)} ${cells.join(' | ')}`);
  // Every request's ms, to pool rounds (p90 across runs).
  if (process.env.KL_BENCH_RAW === '1') console.log(`    raw ${JSON.stringify({ label, times })}`);
}

/** /healthz one after another until `stop.done`: the slowest answer (kld's event loop). */
async function healthLoop(url: string, stop: { done: boolean }): Promise<number> {
  let max = 0;
  while (!stop.done) {
    const t0 = performance.now();
    await (await fetch(`${url}/healthz`)).arrayBuffer();
    max = Math.max(max, performance.now() - t0);
    await new Promise((r) => setTimeout(r, 10));
  }
  return max;
}

/** Where pool-trace-preload writes (KL_BENCH_WHY). */
const POOL_OUT = path.join(os.tmpdir(), `kl-bench-pool-${process.pid}`);

/** The cycles under a flood; with KL_BENCH_WHY, what their slowest request waited for. */
async function measured(
  url: string,
  small: SyntheticState,
  sampler: ActivitySampler | null,
  kldPid: number,
) {
  // What kld recorded before these cycles is not theirs.
  if (sampler) await takePoolTrace(kldPid, POOL_OUT);
  slowest = { op: '', from: 0, to: 0 };
  const stop = { done: false };
  const health = sampler ? healthLoop(url, stop) : Promise.resolve(0);
  try {
    return await cycles(url, small);
  } finally {
    stop.done = true;
    const healthMax = await health;
    if (sampler) {
      const { op, from, to } = slowest;
      console.log(
        `    slowest: ${op} ${formatMs(to - from)} ms; slowest /healthz ${formatMs(healthMax)} ms`,
      );
      for (const l of sampler.summary(from, to).split('\n')) console.log(`      ${l}`);
      for (const l of pgLog.filter((x) => x.at >= from - 50 && x.at <= to + 50)) {
        console.log(`      pg +${Math.round(l.at - from)} ms: ${l.line.slice(0, 160)}`);
      }
      const trace = await takePoolTrace(kldPid, POOL_OUT);
      const epoch = performance.timeOrigin;
      for (const l of summarizePoolTrace(trace, epoch + from, epoch + to).split('\n')) {
        console.log(`      kld ${l}`);
      }
    }
  }
}

async function main(): Promise<void> {
  const logger = WHY
    ? pino(
        { level: 'debug' },
        {
          write(msg: string) {
            const o = JSON.parse(msg) as { postgres?: string; level: number };
            if (o.postgres && /duration:|lock/.test(o.postgres)) {
              pgLog.push({ at: performance.now(), line: o.postgres });
            } else if (!o.postgres && o.level >= 40) process.stderr.write(msg);
          },
        },
      )
    : pino({ level: 'warn' });
  const children = new Set<ChildProcess>();
  const db = await openBenchDatabase(logger);
  if (WHY && !process.env.KL_BENCH_DATABASE_URL) {
    await sql(db.url, `ALTER SYSTEM SET log_min_duration_statement = ${PG_LOG_MS}`);
    await sql(db.url, 'ALTER SYSTEM SET log_lock_waits = on');
    await sql(db.url, 'SELECT pg_reload_conf()');
  }
  const sampler = WHY ? await ActivitySampler.start(db.url) : null;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-bench-flood-'));
  const extra = Object.fromEntries(
    (process.env.KL_BENCH_KLD_ENV ?? '')
      .split(' ')
      .filter(Boolean)
      .map((kv) => kv.split('=') as [string, string]),
  );
  Object.assign(process.env, extra);
  if (WHY) {
    const trace = poolTraceArgs(POOL_OUT);
    process.env.KL_BENCH_KLD_NODE_ARGS = [process.env.KL_BENCH_KLD_NODE_ARGS, trace.nodeArgs]
      .filter(Boolean)
      .join(' ');
    Object.assign(process.env, trace.env);
  }
  const kld = await startKld({
    kld: path.resolve(process.env.KL_BENCH_KLD ?? path.join(__dirname, '../src/kld.js')),
    databaseUrl: db.url,
    dataDir,
    children,
  });
  try {
    const big = new SyntheticState({ instances: SIZE, seed: 1 });
    const small = new SyntheticState({ instances: 20, seed: 2 });
    for (const [name, s] of [
      ['big', big],
      ['small', small],
    ] as const) {
      const r = await fetch(`${kld.url}/v1/states/${name}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: s.text(),
      });
      if (r.status !== 200) throw new Error(`seeding ${name}: ${r.status} ${await r.text()}`);
    }
    while ((await fetch(`${kld.url}/readyz`)).status !== 200) {
      await new Promise((r) => setTimeout(r, 200));
    }
    console.log(`kld ${kld.url}, big state ${SIZE} instances; ${CYCLES} terraform cycles each`);
    report('no flood', await measured(kld.url, small, sampler, kld.pid));
    const floods = [
      queries(50, 8),
      archiveExports(20, true, 0),
      archiveExports(20, false, 15_000),
      subscriptions(100, 15_000),
      scopes(20),
    ];
    const only = (process.env.KL_BENCH_FLOODS ?? '').split(',').filter(Boolean);
    for (const flood of floods.filter(
      (f) => only.length === 0 || only.some((o) => f.name.includes(o)),
    )) {
      const running = flood.start(kld.url);
      await new Promise((r) => setTimeout(r, 1000));
      let label = flood.name;
      try {
        report(label, await measured(kld.url, small, sampler, kld.pid));
      } catch (err) {
        label += ` — ${(err as Error).message}`;
        console.log(`  ${label}`);
      }
      console.log(`    flood answered: ${statusCounts(await running)}`);
    }
  } finally {
    await sampler?.stop();
    await kld.stop();
    await db.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
