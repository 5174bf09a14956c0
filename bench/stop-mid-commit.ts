import type { ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client } from 'pg';
import pino from 'pino';
import { openBenchDatabase } from './support/bench-database';
import { KldProcess, startKld } from './support/kld-process';
import { ActivitySampler } from './support/pg-activity';
import { distribution } from './support/stats';
import { oneResourceState } from './support/one-resource-state';
import { socketPost } from './support/socket-post';

/**
 * How long kld takes to stop when SIGTERM comes while a refresh run's finish
 * of KL_BENCH_SIZE (20,000) changed instances is being committed and
 * projected. Per run: a fresh database and kld, a first commit of the state,
 * a refresh run, its finish sent on a socket, SIGTERM KL_BENCH_DELAYS_MS
 * (a list, "0,1500,3000") after the finish's last byte was written; then the
 * stop's duration, kld's exit status, whether it logged `shutdown took too
 * long`, the finish's answer, the stop's phases from kld's log, and what
 * PostgreSQL ran meanwhile. kld is then started again on the same database:
 * the state must be whole (every instance of one serial), and the run ended
 * or still running. This build and KL_BENCH_KLD_BEFORE (another build's
 * dist/src/kld.js) take turns, KL_BENCH_ROUNDS (3) rounds.
 *
 *   npm run build && node dist/bench/stop-mid-commit.js
 */

const SIZE = Number(process.env.KL_BENCH_SIZE ?? 20_000);
const ROUNDS = Number(process.env.KL_BENCH_ROUNDS ?? 3);
const DELAYS = (process.env.KL_BENCH_DELAYS_MS ?? '0').split(',').map(Number);
/**
 * A read model's table (KL_BENCH_HOLD_TABLE, e.g. resources) another session
 * holds a SHARE lock on from before the finish until kld exited: its
 * projector's statement then waits in PostgreSQL for as long as the stop lasts.
 */
const HOLD_TABLE = process.env.KL_BENCH_HOLD_TABLE;
/**
 * KL_BENCH_DURING=rebuild: the state is committed at both serials first, and
 * SIGTERM comes while a rebuild of the read models (POST
 * /v1/admin/projections/rebuild) replays that log instead.
 */
const DURING_REBUILD = process.env.KL_BENCH_DURING === 'rebuild';
const STATE = 'bench/stopped';
const ACTOR = { 'X-Kilolock-Actor': 'bench' };

function stateDocument(serial: number, suffix: string): unknown {
  const attributes = (i: number) => ({ id: `id-${i}${suffix}` });
  return oneResourceState({ serial, count: SIZE, lineage: 'stop-mid-commit', attributes });
}

async function call(url: string, method: string, route: string, body?: unknown) {
  const res = await fetch(`${url}${route}`, {
    method,
    headers: { 'Content-Type': 'application/json', ...ACTOR },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

interface Outcome {
  stopMs: number;
  code: number | null;
  tooLong: boolean;
  answer: string;
  whole: boolean;
  serial: number;
  run: string;
  phases: string;
  activity: string;
}

/** kld's log lines from its stop on: message and ms since `shutting down`. */
function phasesOf(lines: string[]): string {
  let start: number | null = null;
  const out: string[] = [];
  for (const line of lines) {
    let entry: { msg?: string; time?: string };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      continue;
    }
    const time = entry.time === undefined ? NaN : Date.parse(entry.time);
    if (entry.msg === 'shutting down') start = time;
    if (start === null || Number.isNaN(time) || entry.msg === 'request') continue;
    out.push(`${time - start}:${entry.msg}`);
  }
  return out.join(' | ');
}

async function once(label: string, entry: string, delay: number): Promise<Outcome> {
  const logger = pino({ level: 'warn' }, pino.destination(2));
  const db = await openBenchDatabase(logger, { migrate: false });
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-bench-stop-'));
  const children = new Set<ChildProcess>();
  let kld: KldProcess | null = null;
  let sampler: ActivitySampler | null = null;
  let holder: Client | null = null;
  try {
    const lines: string[] = [];
    kld = await startKld({
      kld: entry,
      databaseUrl: db.url,
      dataDir,
      children,
      logLevel: 'info',
      onStdoutLine: (l) => lines.push(l),
    });
    const first = await call(kld.url, 'POST', `/v1/states/${STATE}`, stateDocument(1, ''));
    if (first.status !== 200) throw new Error(`${label}: first commit answered ${first.status}`);
    const refreshed = stateDocument(2, '-refreshed');
    let run: string | null = null;
    if (DURING_REBUILD) {
      const second = await call(kld.url, 'POST', `/v1/states/${STATE}`, refreshed);
      if (second.status !== 200) throw new Error(`${label}: second commit ${second.status}`);
    } else {
      const started = await call(kld.url, 'POST', '/v1/refresh-runs', { state: STATE });
      if (started.status !== 201) throw new Error(`${label}: refresh start ${started.status}`);
      run = started.body.run_id as string;
    }
    sampler = await ActivitySampler.start(db.url, 50);
    if (HOLD_TABLE !== undefined) {
      holder = new Client({ connectionString: db.url });
      await holder.connect();
      await holder.query(`BEGIN; LOCK TABLE ${HOLD_TABLE} IN SHARE MODE`);
    }
    const finish =
      run === null
        ? await socketPost(kld.url, '/v1/admin/projections/rebuild', ACTOR, '')
        : await socketPost(
            kld.url,
            `/v1/refresh-runs/${run}/finish`,
            ACTOR,
            JSON.stringify({ status: 'succeeded', document: refreshed }),
          );
    await new Promise((r) => setTimeout(r, delay));
    const child = kld.child;
    const stopFrom = sampler.now();
    const t0 = Date.now();
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    const code = await exited;
    clearTimeout(timer);
    const stopMs = Date.now() - t0;
    await holder?.end();
    holder = null;
    const activity = sampler.summary(stopFrom, sampler.now(), 4);
    await sampler.stop();
    sampler = null;
    await finish.closed;
    const answer = /^HTTP\/1\.1 (\d+)/.exec(finish.answer())?.[1] ?? 'none';

    kld = await startKld({ kld: entry, databaseUrl: db.url, dataDir, children });
    const doc = await call(kld.url, 'GET', `/v1/states/${STATE}`);
    const instances = (doc.body.resources as { instances: { attributes: { id: string } }[] }[])[0]
      .instances;
    const kinds = new Set(instances.map((i) => i.attributes.id.endsWith('-refreshed')));
    const serial = doc.body.serial as number;
    const whole = instances.length === SIZE && kinds.size === 1 && kinds.has(serial === 2);
    const runNow =
      run === null
        ? { body: { status: '-' } }
        : await call(kld.url, 'GET', `/v1/refresh-runs/${run}`);
    return {
      stopMs,
      code,
      tooLong: lines.some((l) => l.includes('shutdown took too long')),
      answer,
      whole,
      serial,
      run: String(runNow.body.status),
      phases: phasesOf(lines),
      activity,
    };
  } finally {
    await holder?.end();
    await sampler?.stop();
    await kld?.stop();
    for (const c of children) c.kill('SIGKILL');
    fs.rmSync(dataDir, { recursive: true, force: true });
    await db.close();
  }
}

async function main(): Promise<void> {
  const builds: [string, string][] = [['this build', path.resolve(__dirname, '../src/kld.js')]];
  if (process.env.KL_BENCH_KLD_BEFORE) builds.unshift(['before', process.env.KL_BENCH_KLD_BEFORE]);
  const load = () =>
    os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(' ');
  console.log(
    `${DURING_REBUILD ? 'rebuild after two commits' : 'refresh finish'} of ${SIZE} changed ` +
      `instances, SIGTERM ${DELAYS.join('/')} ms after its ` +
      `last byte${HOLD_TABLE ? `, ${HOLD_TABLE} held locked` : ''}, ${ROUNDS} rounds; load ${load()}`,
  );
  const stops = new Map<string, number[]>(builds.map(([label]) => [label, []]));
  const failed = new Map<string, number>(builds.map(([label]) => [label, 0]));
  for (let r = 0; r < ROUNDS; r++) {
    for (const delay of DELAYS) {
      for (const [label, entry] of builds) {
        const o = await once(label, entry, delay);
        stops.get(label)!.push(o.stopMs);
        const ok = o.code === 0 && !o.tooLong && o.whole;
        if (!ok) failed.set(label, failed.get(label)! + 1);
        console.log(
          `round ${r + 1} +${delay} ms ${label}: stop ${o.stopMs} ms, exit ${o.code}` +
            `${o.tooLong ? ' (shutdown took too long)' : ''}, answer ${o.answer}, ` +
            `after restart serial ${o.serial} ${o.whole ? 'whole' : 'NOT WHOLE'}, run ${o.run}; ` +
            `load ${load()}\n    ${o.phases}\n    ${o.activity.replace(/\n/g, '\n    ')}`,
        );
      }
    }
  }
  for (const [label, ms] of stops) {
    const d = distribution(ms);
    console.log(
      `${label}: ${ms.length} stops, median ${d.p50} ms, min ${d.min}, max ${d.max}; ` +
        `${failed.get(label)} not exit 0 within the deadline or not whole`,
    );
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
