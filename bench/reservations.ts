import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { parseAddressGlob, ReservationMode } from '../src/domain/reservations/address-glob';
import { conflictsWith, coveringHolders, uncovered } from '../src/domain/state/holders';
import { readGlobsAhead } from '../src/domain/state/reserve';
import { decide } from '../src/domain/state/state.decider';
import { evolve } from '../src/domain/state/state.evolve';
import { ActiveState, initialState, Reservation } from '../src/domain/state/state.model';
import { parseInstanceAddress } from '../src/domain/terraform/instance-address';
import {
  pairwiseConflicts,
  pairwiseCovering,
  pairwiseUncovered,
} from '../test/support/pairwise-holders';
import { openBenchDatabase } from './support/bench-database';
import { postSyntheticState, send } from './support/http-send';
import { processCpuMs } from './support/process-cpu';
import { SMALL_STATE } from './support/state-generator';
import { Kld, killAll, startKld } from './support/refresh-processes';
import { printMachine, printTable } from './support/report';
import { reservationDecisions } from './support/reservation-decisions';
import { formatInt, formatMs } from './support/stats';

/**
 * Conflict checks between apply runs (wave 19): what deciding costs when a
 * run starts beside another that holds as many globs, with the glob index
 * and with the pairwise checks it replaced (test/support/pairwise-holders,
 * the wave-18 code) as the peer, in this process (the decider is pure):
 *
 *   scattered   run A holds N distinct resources across 50 modules, run B asks
 *               N others (`module.m7.aws_instance.b123[0]`)
 *   keys        A holds N instances of one resource, B N other instances of it
 *   commit      B commits 20,000 addresses (each its own write glob) beside A's
 *               10,000 (RESERVATION.NOT_HELD and covering-holder checks)
 *
 * "cold" parses and indexes every reservation (a state just loaded),
 * "rebuilt" indexes again what was parsed before (a state whose reservation
 * map another run's event replaced), "warm" reuses the index (the same
 * aggregate again). Then, end to end through a real kld
 * (own database, embedded PostgreSQL unless KL_BENCH_DATABASE_URL): run A's
 * POST …/apply-runs of N globs, then run B's beside it, wall time and kld's
 * CPU; then a small run's start on a big state (wave 19): a POST of a
 * KL_BENCH_BIG_STATE-instance state (20,000), right after it a 2-glob
 * POST …/apply-runs and a 2-glob engine run start (each aborted), then the
 * same again on the warm state. Wave 20: unrelated requests right after a
 * big POST, GETs of a small other state one after another for half a
 * second from the moment another new BIG_STATE-instance state's POST
 * answered, and /healthz beside them (answered in process: its wait is
 * kld's event loop, where the GET waits for PostgreSQL too); and run A's
 * heartbeat (E2E_SIZE globs), then a 2-glob run's start beside it. With KL_BENCH_KLD_BEFORE=<other kld.js> the same on
 * that build, each kld with its own database, the builds taking turns round
 * by round. Prints figures; never fails on a miss.
 *
 *   npm run bench:reservations
 *   KL_BENCH_SIZES=1000,10000,20000   KL_BENCH_E2E_SIZE=10000   KL_BENCH_E2E=0 (skip kld)
 *   KL_BENCH_BIG_STATE=20000   KL_BENCH_BIG_ROUNDS=3   (0 in KL_BENCH_SIZES, KL_BENCH_E2E_SIZE
 *   or KL_BENCH_BIG_ROUNDS skips that part)
 *
 * Wave 22: each decision of a run of N globs (its start, a 409 naming its
 * holders, its heartbeat, a 2-glob start after it) timed in process, for
 * this build's domain and KL_BENCH_DOMAIN_BEFORE=<another worktree>'s
 * (bench/support/reservation-decisions).
 */

const SIZES = (process.env.KL_BENCH_SIZES ?? '1000,10000,20000').split(',').map(Number);
const E2E_SIZE = Number(process.env.KL_BENCH_E2E_SIZE ?? 10_000);
const BIG_STATE = Number(process.env.KL_BENCH_BIG_STATE ?? 20_000);
const BIG_ROUNDS = Number(process.env.KL_BENCH_BIG_ROUNDS ?? 3);
const COMMIT = 20_000;
const COMMIT_BESIDE = 10_000;
const ROOT = path.resolve(__dirname, '../..');
const BUILDS: [string, string][] = [['this build', path.join(ROOT, 'dist/src/kld.js')]];
const before = process.env.KL_BENCH_KLD_BEFORE;
if (before) BUILDS.push(['before', before]);

const NOW = '2026-12-02T12:00:00.000Z';
const LATER = '2026-12-02T13:00:00.000Z';

type Shape = 'scattered' | 'keys';

/** Run `run`'s N globs of a shape; A and B never meet. */
function globs(shape: Shape, run: 'a' | 'b', n: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    out.push(
      shape === 'scattered'
        ? `module.m${i % 50}.aws_instance.${run}${i}[0]`
        : `aws_instance.fleet[${run === 'a' ? i : n + i}]`,
    );
  }
  return out;
}

function stateHolding(runs: { runId: string; globs: string[]; mode: ReservationMode }[]) {
  const created = evolve(initialState(), {
    type: 'StateCreated',
    data: { stateId: 's', name: 'bench' },
  }) as ActiveState;
  const reservations = new Map<string, Reservation>();
  for (const run of runs) {
    // A run's reservations share its info, as evolve makes them.
    const info = {};
    for (const glob of run.globs) {
      const id = `r${reservations.size}`;
      reservations.set(id, {
        id,
        runId: run.runId,
        glob,
        mode: run.mode,
        holder: 'bench',
        info,
        acquiredAt: NOW,
        expiresAt: LATER,
      });
    }
  }
  return { ...created, version: 1, serial: 1, lineage: 'l', reservations };
}

/** The same state, its reservations new objects in a new map: nothing parsed or indexed yet. */
const fresh = (s: ActiveState): ActiveState => ({
  ...s,
  reservations: new Map([...s.reservations].map(([id, r]) => [id, { ...r }])),
});

/** The state after run `runId`'s heartbeat: its reservations new objects, their info kept. */
const renewed = (s: ActiveState, runId: string): ActiveState =>
  evolve(s, {
    type: 'ReservationRenewed',
    data: {
      stateId: s.stateId,
      runId,
      reservationIds: [...s.reservations.values()]
        .filter((r) => r.runId === runId)
        .map((r) => r.id),
      expiresAt: LATER,
    },
  }) as ActiveState;

/** The same reservations in a new map: the state after another run's event. */
const remapped = (s: ActiveState): ActiveState => ({
  ...s,
  reservations: new Map(s.reservations),
});

/** Minimum wall time of `reps` calls, in ms, and the last answer; each on an input made untimed. */
function timeOn<S, T>(reps: number, input: () => S, f: (s: S) => T): { ms: number; out: T } {
  let ms = Infinity;
  let out!: T;
  for (let i = 0; i < reps; i++) {
    const s = input();
    const t0 = performance.now();
    out = f(s);
    ms = Math.min(ms, performance.now() - t0);
  }
  return { ms, out };
}

function time<T>(reps: number, f: () => T): { ms: number; out: T } {
  return timeOn(reps, () => undefined, f);
}

/** Fewer rounds where the pairwise peer takes seconds. */
const repsFor = (n: number) => (n <= 1_000 ? 5 : 1);

function inProcess(): void {
  const rows: string[][] = [];
  for (const shape of ['scattered', 'keys'] as Shape[]) {
    for (const n of SIZES) {
      const state = stateHolding([{ runId: 'a', globs: globs(shape, 'a', n), mode: 'write' }]);
      const wantedText = globs(shape, 'b', n);
      const wanted = wantedText.map((g) => ({ glob: parseAddressGlob(g), mode: 'write' as const }));
      const asker = { runId: 'b' };
      const cold = timeOn(
        5,
        () => fresh(state),
        (s) => conflictsWith(s, wanted, asker, NOW),
      );
      conflictsWith(state, wanted, asker, NOW);
      const rebuilt = timeOn(
        5,
        () => remapped(state),
        (s) => conflictsWith(s, wanted, asker, NOW),
      );
      const warm = time(5, () => conflictsWith(state, wanted, asker, NOW));
      const peer = time(repsFor(n), () => pairwiseConflicts(state, wanted, asker, NOW));
      if (cold.out.live.length !== 0 || peer.out.live.length !== 0) throw new Error('not disjoint');
      const command = {
        type: 'AcquireReservations' as const,
        data: {
          name: 'bench',
          runId: 'b',
          reservationIds: wantedText.map((_, i) => `b${i}`),
          requests: wantedText.map((glob) => ({ glob, mode: 'write' as const })),
          leaseSeconds: 900,
          info: {},
          baseVersion: 1,
          writeSet: wantedText,
          readSet: [],
        },
        metadata: { actor: 'bench', correlationId: 'c', now: NOW },
      };
      const decided = timeOn(
        3,
        () => fresh(state),
        (s) => decide(command, s),
      );
      rows.push([
        `${shape} start`,
        formatInt(n),
        formatMs(cold.ms),
        formatMs(rebuilt.ms),
        formatMs(warm.ms),
        formatMs(peer.ms),
        `${(peer.ms / cold.ms).toFixed(0)}×`,
        formatMs(decided.ms),
      ]);
    }
  }

  // A commit of COMMIT addresses by run b, each its own write glob, beside run a.
  const written = globs('scattered', 'b', COMMIT);
  const state = stateHolding([
    { runId: 'a', globs: globs('scattered', 'a', COMMIT_BESIDE), mode: 'write' },
    { runId: 'b', globs: written, mode: 'write' },
  ]);
  const touched = written.map((text) => ({ text, parsed: parseInstanceAddress(text) }));
  const asker = { runId: 'b' };
  const check = (s: ActiveState) => [
    uncovered(s, 'b', touched).length,
    coveringHolders(s, touched, asker, NOW).live.length,
  ];
  const cold = timeOn(3, () => fresh(state), check);
  check(state);
  const rebuilt = timeOn(3, () => remapped(state), check);
  const warm = time(3, () => check(state));
  const peer = time(1, () => [
    pairwiseUncovered(state, 'b', touched).length,
    pairwiseCovering(state, touched, asker, NOW).live.length,
  ]);
  if (cold.out.join() !== peer.out.join()) throw new Error('commit answers differ');
  rows.push([
    `commit ${formatInt(COMMIT)} beside`,
    formatInt(COMMIT_BESIDE),
    formatMs(cold.ms),
    formatMs(rebuilt.ms),
    formatMs(warm.ms),
    formatMs(peer.ms),
    `${(peer.ms / cold.ms).toFixed(0)}×`,
    '-',
  ]);
  // A 2-glob run's start right after run a's heartbeat.
  for (const n of SIZES) {
    const held = stateHolding([{ runId: 'a', globs: globs('scattered', 'a', n), mode: 'write' }]);
    const wanted = globs('scattered', 'b', 2).map((g) => ({
      glob: parseAddressGlob(g),
      mode: 'write' as const,
    }));
    const start = (s: ActiveState) => conflictsWith(s, wanted, { runId: 'b' }, NOW);
    start(held);
    const afterHeartbeat = timeOn(
      5,
      () => renewed(held, 'a'),
      (s) => start(s),
    );
    const cold = timeOn(
      5,
      () => fresh(held),
      (s) => start(s),
    );
    const warm = time(5, () => start(held));
    rows.push([
      '2-glob start after heartbeat',
      formatInt(n),
      formatMs(cold.ms),
      formatMs(afterHeartbeat.ms),
      formatMs(warm.ms),
      '-',
      '-',
      '-',
    ]);
  }
  console.log('');
  printTable(
    [
      'case',
      'globs per run',
      'index cold ms',
      'rebuilt ms',
      'warm ms',
      'pairwise ms',
      'speed-up (cold)',
      'decide (cold) ms',
    ],
    rows,
  );
}

interface Figure {
  build: string;
  shape: Shape;
  firstMs: number;
  firstCpu: number;
  besideMs: number;
  besideCpu: number;
}

async function endToEnd(): Promise<void> {
  const logger = pino({ level: 'warn' });
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-bench-reservations-'));
  const undo: (() => Promise<void> | void)[] = [() => fs.rmSync(work, { recursive: true })];
  const figures: Figure[] = [];
  const starts: StartFigure[] = [];
  const gets: GetFigure[] = [];
  const beats: HeartbeatFigure[] = [];
  try {
    const klds: { label: string; kld: Kld; agent: http.Agent }[] = [];
    for (const [label, kldJs] of BUILDS) {
      // Another build's kld migrates its own database: it refuses a migration it does not know.
      const db = await openBenchDatabase(logger, { migrate: label === 'this build' });
      undo.push(() => db.close());
      const kld = await startKld(kldJs, db.url, path.join(work, label.replace(/\W/g, '-')));
      undo.push(() => kld.stop());
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      undo.push(() => agent.destroy());
      klds.push({ label, kld, agent });
      const small = await send(agent, 'POST', `${kld.url}/v1/states/${SMALL}`, json(SMALL_STATE));
      if (small.status !== 200) throw new Error(`POST ${SMALL}: ${small.status} ${small.body}`);
    }
    // The builds take turns, the first one first in odd rounds only.
    const turns = (round: number) => (round % 2 === 1 ? klds : [...klds].reverse());
    for (const shape of (E2E_SIZE > 0 ? ['scattered', 'keys'] : []) as Shape[]) {
      for (const { label, kld, agent } of klds) {
        figures.push(await besideRun(kld, agent, label, shape));
        const f = figures[figures.length - 1];
        console.log(
          `  ${label} ${shape}: run A ${formatMs(f.firstMs)} ms (kld CPU ${formatMs(f.firstCpu)}), ` +
            `run B beside it ${formatMs(f.besideMs)} ms (kld CPU ${formatMs(f.besideCpu)})`,
        );
      }
    }
    for (let round = 1; round <= BIG_ROUNDS; round++) {
      for (const { label, kld, agent } of turns(round)) {
        const f = await smallStartOnBigState(kld, agent, label, round);
        starts.push(f);
        console.log(
          `  ${label} round ${round}: POST state ${formatMs(f.postMs)} ms; ` +
            `2-glob start after it: apply-runs ${formatMs(f.applyFirstMs)} ms ` +
            `(kld CPU ${formatMs(f.applyFirstCpu)}), engine ${formatMs(f.engineFirstMs)} ms; ` +
            `again: apply-runs ${formatMs(f.applyAgainMs)} ms, engine ${formatMs(f.engineAgainMs)} ms`,
        );
        const g = await getsAfterBigPost(kld, agent, label, round);
        gets.push(g);
        console.log(
          `  ${label} round ${round}: GET of a small state after a big POST: first ` +
            `${formatMs(g.firstMs)} ms, slowest of ${g.count} in ${GET_WINDOW_MS} ms ` +
            `${formatMs(g.maxMs)} ms; slowest /healthz ${formatMs(g.healthMaxMs)} ms`,
        );
      }
    }
    for (let round = 1; round <= (E2E_SIZE > 0 ? BIG_ROUNDS : 0); round++) {
      for (const { label, kld, agent } of turns(round)) {
        const h = await heartbeatBeside(kld, agent, label, round);
        beats.push(h);
        console.log(
          `  ${label} round ${round}: 2-glob start beside run A ${formatMs(h.beforeMs)} ms; ` +
            `A's heartbeat ${formatMs(h.heartbeatMs)} ms; 2-glob start after it ` +
            `${formatMs(h.afterMs)} ms (kld CPU ${formatMs(h.afterCpu)})`,
        );
      }
    }
  } finally {
    while (undo.length) await Promise.resolve(undo.pop()!()).catch(() => undefined);
    await killAll();
  }
  console.log('');
  printTable(
    ['build', 'shape', 'run A POST ms', 'kld CPU ms', 'run B beside ms', 'kld CPU ms'],
    figures.map((f) => [
      f.build,
      f.shape,
      formatMs(f.firstMs),
      formatMs(f.firstCpu),
      formatMs(f.besideMs),
      formatMs(f.besideCpu),
    ]),
  );
  if (BIG_ROUNDS <= 0) return;
  const range = <T>(list: T[], build: string, f: (x: T) => number) => {
    const v = list.filter((x) => (x as { build: string }).build === build).map(f);
    return v.length === 0 ? '-' : `${formatMs(Math.min(...v))}–${formatMs(Math.max(...v))}`;
  };
  console.log(
    `\nA 2-glob run's start right after a POST of ${formatInt(BIG_STATE)} instances ` +
      `(min–max of ${BIG_ROUNDS} rounds, each on a new state)`,
  );
  printTable(
    [
      'build',
      'POST state ms',
      'apply-runs start ms',
      'kld CPU ms',
      'engine start ms',
      'apply-runs again ms',
      'engine again ms',
    ],
    BUILDS.map(([build]) => [
      build,
      range(starts, build, (s) => s.postMs),
      range(starts, build, (s) => s.applyFirstMs),
      range(starts, build, (s) => s.applyFirstCpu),
      range(starts, build, (s) => s.engineFirstMs),
      range(starts, build, (s) => s.applyAgainMs),
      range(starts, build, (s) => s.engineAgainMs),
    ]),
  );
  console.log(
    `\nGETs of a small other state, back to back for ${GET_WINDOW_MS} ms from the moment a POST ` +
      `of ${formatInt(BIG_STATE)} instances answered (min–max of ${BIG_ROUNDS} rounds)`,
  );
  printTable(
    [
      'build',
      'POST state ms',
      'first GET ms',
      'slowest GET ms',
      'GETs answered',
      'slowest /healthz ms',
    ],
    BUILDS.map(([build]) => [
      build,
      range(gets, build, (g) => g.postMs),
      range(gets, build, (g) => g.firstMs),
      range(gets, build, (g) => g.maxMs),
      range(gets, build, (g) => g.count),
      range(gets, build, (g) => g.healthMaxMs),
    ]),
  );
  if (beats.length === 0) return;
  console.log(
    `\nRun A of ${formatInt(E2E_SIZE)} globs: its heartbeat, and a 2-glob run's start beside ` +
      `it before and after the heartbeat (min–max of ${BIG_ROUNDS} rounds)`,
  );
  printTable(
    ['build', 'start before ms', 'heartbeat ms', 'start after ms', 'kld CPU ms'],
    BUILDS.map(([build]) => [
      build,
      range(beats, build, (h) => h.beforeMs),
      range(beats, build, (h) => h.heartbeatMs),
      range(beats, build, (h) => h.afterMs),
      range(beats, build, (h) => h.afterCpu),
    ]),
  );
}

/** The small state the GETs read: another state than the big one just written. */
const SMALL = 'bench/small-other';
const GET_WINDOW_MS = 500;

interface GetFigure {
  build: string;
  postMs: number;
  firstMs: number;
  maxMs: number;
  count: number;
  /** The slowest /healthz (answered in process: what kld's event loop made it wait). */
  healthMaxMs: number;
}

/**
 * A new state of BIG_STATE instances, then at once GETs of SMALL one after
 * another for GET_WINDOW_MS: what terraform reading another state meets
 * while kld does what the big POST left behind (its snapshot above all).
 */
async function getsAfterBigPost(
  kld: Kld,
  agent: http.Agent,
  build: string,
  round: number,
): Promise<GetFigure> {
  const name = `bench/big-get-${round}`;
  const posted = await postSyntheticState(agent, kld.url, name, BIG_STATE, 100 + round);
  const until = performance.now() + GET_WINDOW_MS;
  const probe = async (on: http.Agent, route: string) => {
    const times: number[] = [];
    while (performance.now() < until) {
      const r = await send(on, 'GET', `${kld.url}${route}`);
      if (r.status !== 200) throw new Error(`GET ${route}: ${r.status} ${r.body.slice(0, 300)}`);
      times.push(r.ms);
    }
    return times;
  };
  const health = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const [times, healthTimes] = await Promise.all([
      probe(agent, `/v1/states/${SMALL}`),
      probe(health, '/healthz'),
    ]);
    return {
      build,
      postMs: posted.ms,
      firstMs: times[0],
      maxMs: Math.max(...times),
      count: times.length,
      healthMaxMs: Math.max(...healthTimes),
    };
  } finally {
    health.destroy();
  }
}

interface HeartbeatFigure {
  build: string;
  beforeMs: number;
  heartbeatMs: number;
  afterMs: number;
  afterCpu: number;
}

/**
 * Run A of E2E_SIZE scattered globs on a new state, a 2-glob run B beside
 * it (ended), A's heartbeat, then a 2-glob run C beside it: the conflict
 * check C's start makes comes after the heartbeat gave A's reservations new
 * objects. Every run ended after.
 */
async function heartbeatBeside(
  kld: Kld,
  agent: http.Agent,
  build: string,
  round: number,
): Promise<HeartbeatFigure> {
  const name = `bench/heartbeat-${round}`;
  const posted = await send(agent, 'POST', `${kld.url}/v1/states/${name}`, json(SMALL_STATE));
  if (posted.status !== 200) throw new Error(`POST state: ${posted.status} ${posted.body}`);
  const call = async (route: string, body: unknown, want: number) => {
    const cpu0 = processCpuMs(kld.pid);
    const r = await send(agent, 'POST', `${kld.url}${route}`, json(body));
    const cpu = processCpuMs(kld.pid) - cpu0;
    if (r.status !== want) throw new Error(`${route}: ${r.status} ${r.body.slice(0, 300)}`);
    return { ms: r.ms, cpu, runId: (JSON.parse(r.body) as { run_id?: string }).run_id! };
  };
  const runs = `/v1/api/states/${name}/apply-runs`;
  const abort = (runId: string) => call(`/v1/api/apply-runs/${runId}/abort`, {}, 200);
  const a = await call(
    runs,
    { base_version: 1, write: globs('scattered', 'a', E2E_SIZE), lease_seconds: 3600 },
    201,
  );
  const small = { base_version: 1, write: globs('scattered', 'b', 2) };
  const before = await call(runs, small, 201);
  await abort(before.runId);
  const beat = await call(`${runs}/${a.runId}/heartbeat`, { lease_seconds: 3600 }, 200);
  const after = await call(runs, small, 201);
  await abort(after.runId);
  await abort(a.runId);
  return {
    build,
    beforeMs: before.ms,
    heartbeatMs: beat.ms,
    afterMs: after.ms,
    afterCpu: after.cpu,
  };
}

interface StartFigure {
  build: string;
  postMs: number;
  applyFirstMs: number;
  applyFirstCpu: number;
  engineFirstMs: number;
  applyAgainMs: number;
  engineAgainMs: number;
}

/**
 * A new state of BIG_STATE instances, then at once a 2-glob apply run and a
 * 2-glob engine run (each aborted or finished before the next), then both
 * again: what every `kl apply` and engine operation pays on a big state.
 */
async function smallStartOnBigState(
  kld: Kld,
  agent: http.Agent,
  build: string,
  round: number,
): Promise<StartFigure> {
  const name = `bench/big-${round}`;
  const posted = await postSyntheticState(agent, kld.url, name, BIG_STATE, round);
  const write = ['terraform_data.x[1]', 'terraform_data.x[2]'];
  const call = async (route: string, body: unknown, want: number) => {
    const r = await send(agent, 'POST', `${kld.url}${route}`, json(body));
    if (r.status !== want) throw new Error(`${route}: ${r.status} ${r.body.slice(0, 300)}`);
    return { ms: r.ms, runId: (JSON.parse(r.body) as { run_id?: string }).run_id };
  };
  const apply = async () => {
    const cpu0 = processCpuMs(kld.pid);
    const r = await call(`/v1/api/states/${name}/apply-runs`, { base_version: 1, write }, 201);
    const cpu = processCpuMs(kld.pid) - cpu0;
    await call(`/v1/api/apply-runs/${r.runId}/abort`, {}, 200);
    return { ms: r.ms, cpu };
  };
  const engine = async () => {
    const r = await call(
      `/v1/engine/states/${name}/runs`,
      { operation: 'bench', base_version: 1, write },
      201,
    );
    await call(`/v1/engine/states/${name}/runs/${r.runId}/finish`, { status: 'failed' }, 200);
    return r.ms;
  };
  const applyFirst = await apply();
  const engineFirst = await engine();
  const applyAgain = await apply();
  const engineAgain = await engine();
  return {
    build,
    postMs: posted.ms,
    applyFirstMs: applyFirst.ms,
    applyFirstCpu: applyFirst.cpu,
    engineFirstMs: engineFirst,
    applyAgainMs: applyAgain.ms,
    engineAgainMs: engineAgain,
  };
}

/** A fresh state with one version, run A of E2E_SIZE globs, then run B beside it; both aborted. */
async function besideRun(kld: Kld, agent: http.Agent, build: string, shape: Shape) {
  const name = `bench/reservations-${shape}`;
  const doc = {
    version: 4,
    terraform_version: '1.11.4',
    serial: 1,
    lineage: `bench-${shape}`,
    outputs: {},
    resources: [],
  };
  const posted = await send(agent, 'POST', `${kld.url}/v1/states/${name}`, json(doc));
  if (posted.status !== 200) throw new Error(`POST state: ${posted.status} ${posted.body}`);
  const start = async (run: 'a' | 'b') => {
    const cpu0 = processCpuMs(kld.pid);
    const r = await send(
      agent,
      'POST',
      `${kld.url}/v1/api/states/${name}/apply-runs`,
      json({ base_version: 1, write: globs(shape, run, E2E_SIZE), lease_seconds: 3600 }),
    );
    const cpu = processCpuMs(kld.pid) - cpu0;
    if (r.status !== 201) throw new Error(`run ${run}: ${r.status} ${r.body.slice(0, 300)}`);
    return { ms: r.ms, cpu, runId: (JSON.parse(r.body) as { run_id: string }).run_id };
  };
  const a = await start('a');
  const b = await start('b');
  for (const run of [a, b]) {
    const r = await send(
      agent,
      'POST',
      `${kld.url}/v1/api/apply-runs/${run.runId}/abort`,
      json({}),
    );
    if (r.status !== 200) throw new Error(`abort: ${r.status} ${r.body.slice(0, 300)}`);
  }
  return { build, shape, firstMs: a.ms, firstCpu: a.cpu, besideMs: b.ms, besideCpu: b.cpu };
}

const json = (v: unknown) => Buffer.from(JSON.stringify(v));

async function main(): Promise<void> {
  console.log('Conflict checks between apply runs: glob index vs pairwise');
  printMachine();
  if (SIZES.length > 0 && SIZES[0] > 0) {
    console.log(`\nIn process (decider only), sizes ${SIZES.map(formatInt).join(' / ')}`);
    inProcess();
    await reservationDecisions(
      SIZES,
      { decide, evolve, initialState, readGlobsAhead },
      process.env.KL_BENCH_DOMAIN_BEFORE,
    );
  }
  if (process.env.KL_BENCH_E2E === '0') return;
  console.log(`\nThrough kld: POST …/apply-runs of ${formatInt(E2E_SIZE)} globs beside another`);
  await endToEnd();
}

main().catch(async (err) => {
  console.error(err);
  await killAll();
  process.exit(1);
});
