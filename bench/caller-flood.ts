import { ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { openBenchDatabase } from './support/bench-database';
import { startKld } from './support/kld-process';
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
 */

const SIZE = intEnv('KL_BENCH_SIZE', 20_000);
const CYCLES = intEnv('KL_BENCH_CYCLES', 5);
const OP_TIMEOUT_MS = 30_000;
const FLOODER = 'flooder';

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
    start: (url) =>
      settle(
        Array.from(
          { length: n },
          () =>
            new Promise<string>((resolve, reject) => {
              const req = http.get(
                `${url}/v1/events?follow=true`,
                { headers: asFlooder },
                (res) => {
                  res.resume();
                  setTimeout(() => {
                    req.destroy();
                    resolve(String(res.statusCode));
                  }, holdMs);
                },
              );
              req.on('error', reject);
            }),
        ),
      ),
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
      times[op]!.push(performance.now() - t0);
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
}

async function main(): Promise<void> {
  const logger = pino({ level: 'warn' });
  const children = new Set<ChildProcess>();
  const db = await openBenchDatabase(logger);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-bench-flood-'));
  const extra = Object.fromEntries(
    (process.env.KL_BENCH_KLD_ENV ?? '')
      .split(' ')
      .filter(Boolean)
      .map((kv) => kv.split('=') as [string, string]),
  );
  Object.assign(process.env, extra);
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
    report('no flood', await cycles(kld.url, small));
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
        report(label, await cycles(kld.url, small));
      } catch (err) {
        label += ` — ${(err as Error).message}`;
        console.log(`  ${label}`);
      }
      console.log(`    flood answered: ${statusCounts(await running)}`);
    }
  } finally {
    await kld.stop();
    await db.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
