import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client } from 'pg';
import { sendBytes } from './http-send';
import type { KldProcess } from './kld-process';
import { DatabaseCpuMeter, processCpuMs } from './process-cpu';
import { SyntheticState } from './state-generator';
import { formatMs } from './stats';
import { pushNextSerials } from './terraform-pushes';
import { lockInfoBody, runProbe } from './probe-harness';

/**
 * Probe: what each exchange of a `terraform state push` of the next serial
 * costs (LOCK, GET, POST of a few changed instances, UNLOCK), for one or more
 * kld builds taking turns, each on its own database of one embedded
 * PostgreSQL: per exchange the wall time (min / median), kld's CPU and its
 * database's backends' CPU (totals over the rounds divided by the rounds, so
 * 10 ms ticks average out), and, from a first round of its own, the
 * statements kld sent (one line per round trip). Then, with
 * KL_PROBE_PUSHES=N, N real `terraform state push` runs per build and to the
 * `pg` backend, taking turns; for the first, what terraform sent, on which
 * connections, and how many statements kld sent for each request; each
 * push's CPU of terraform and of PostgreSQL. KL_PROBE_PG_LOG=1 prints the
 * statements of the `pg` backend's sessions with their durations.
 *
 *   node dist/bench/support/push-exchange-probe.js base=/path/a/dist/src/kld.js new=dist/src/kld.js
 *   KL_PROBE_INSTANCES=1000 KL_PROBE_ROUNDS=40 KL_PROBE_CHANGED=3 KL_PROBE_PUSHES=0
 */

const INSTANCES = Number(process.env.KL_PROBE_INSTANCES ?? 1000);
const ROUNDS = Number(process.env.KL_PROBE_ROUNDS ?? 40);
const CHANGED = Number(process.env.KL_PROBE_CHANGED ?? 3);
const PUSHES = Number(process.env.KL_PROBE_PUSHES ?? 0);
const EXCHANGES = ['LOCK', 'GET', 'POST', 'UNLOCK'] as const;
type Exchange = (typeof EXCHANGES)[number];

interface Build {
  label: string;
  kld: KldProcess;
  url: string;
  state: SyntheticState;
  meter: DatabaseCpuMeter | null;
  posted: Buffer;
  wall: Record<Exchange, number[]>;
  kldCpu: Record<Exchange, number>;
  pgCpu: Record<Exchange, number>;
  sql: Partial<Record<Exchange, string[]>>;
}

async function sqlSince(b: Build, out: string): Promise<string[]> {
  const file = `${out}.${b.kld.pid}`;
  fs.rmSync(file, { force: true });
  process.kill(b.kld.pid, 'SIGUSR2');
  for (let i = 0; i < 100 && !fs.existsSync(file); i++) await new Promise((r) => setTimeout(r, 10));
  await new Promise((r) => setTimeout(r, 20));
  return fs.readFileSync(file, 'utf8').split('\n').filter(Boolean);
}

/** One push's four exchanges; `sql` collects each one's statements instead of timing it. */
async function round(b: Build, agent: http.Agent, n: number, sql: string | null): Promise<void> {
  for (let c = 0; c < CHANGED; c++) b.state.changeOne((n * CHANGED + c) * 7919 + 13);
  const id = `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
  const info = lockInfoBody(id, 'probe@host');
  const steps: [Exchange, () => Promise<{ status: number; body: Buffer; ms: number }>][] = [
    ['LOCK', () => sendBytes(agent, 'LOCK', b.url, info)],
    ['GET', () => sendBytes(agent, 'GET', b.url)],
    [
      'POST',
      () => {
        b.state.serial += 1;
        b.posted = Buffer.from(b.state.text());
        return sendBytes(agent, 'POST', `${b.url}?ID=${id}`, b.posted);
      },
    ],
    ['UNLOCK', () => sendBytes(agent, 'UNLOCK', b.url, info)],
  ];
  const expected = b.posted;
  for (const [name, step] of steps) {
    if (sql !== null) await sqlSince(b, sql);
    const cpu0 = processCpuMs(b.kld.pid);
    const pg0 = b.meter?.totalMs() ?? 0;
    const r = await step();
    const cpu = processCpuMs(b.kld.pid) - cpu0;
    const pg = (b.meter?.totalMs() ?? 0) - pg0;
    if (r.status !== 200) throw new Error(`${b.label} ${name}: ${r.status} ${r.body.toString()}`);
    if (name === 'GET' && !r.body.equals(expected)) throw new Error(`${b.label}: GET differs`);
    if (sql !== null) {
      b.sql[name] = (await sqlSince(b, sql)).filter((l) => l.startsWith('sql '));
    } else {
      b.wall[name].push(r.ms);
      b.kldCpu[name] += cpu;
      b.pgCpu[name] += pg;
    }
  }
}

function summary(xs: number[]): string {
  const s = [...xs].sort((a, b) => a - b);
  return `${formatMs(s[0])} / ${formatMs(s[Math.floor(s.length / 2)])}`;
}

/** Real pushes of the next serial, builds and `pg` taking turns; the first through a proxy. */
async function pushes(
  tmp: string,
  pgUrl: string,
  builds: Build[],
  sql: string,
  postmaster: number | null,
): Promise<void> {
  if (process.env.KL_PROBE_PG_LOG === '1') {
    // terraform's `pg` backend opens a session per run: each then logs its
    // statements with their durations (the harness prints PostgreSQL's log).
    const c = new Client({ connectionString: pgUrl });
    await c.connect();
    await c.query('ALTER DATABASE postgres SET log_min_duration_statement = 0');
    // Not the state's text: 600 KB a line would slow the push it measures.
    await c.query('ALTER DATABASE postgres SET log_parameter_max_length = 0');
    await c.end();
  }
  const times = await pushNextSerials({
    tmp,
    pgUrl,
    builds,
    instances: INSTANCES,
    pushes: PUSHES,
    postmaster,
    around: async (t, i) => {
      const build = builds.find((b) => b.label === t.label);
      if (!build) return async () => {};
      await sqlSince(build, sql);
      return async () => {
        if (i !== 0) return;
        // What terraform sent, on which connections, and kld's statements for each.
        let statements = 0;
        const lines: string[] = [];
        for (const line of await sqlSince(build, sql)) {
          if (line.startsWith('sql ')) statements++;
          else {
            if (lines.length > 0) lines[lines.length - 1] += `, ${statements} statements`;
            lines.push(line.slice(5));
            statements = 0;
          }
        }
        if (lines.length > 0) lines[lines.length - 1] += `, ${statements} statements`;
        console.log(`${t.label}, what terraform sent (first push):\n  ${lines.join('\n  ')}`);
      };
    },
  });
  console.log(`state push of the next serial, ${PUSHES} each, taking turns: min / median`);
  for (const [label, xs] of times) {
    const mean = (f: (x: (typeof xs)[number]) => number) =>
      formatMs(xs.reduce((s, x) => s + f(x), 0) / xs.length);
    console.log(
      `  ${label.padEnd(6)} wall ${summary(xs.map((x) => x.ms))} ms` +
        (label === 'pg' ? '' : `, kld CPU ${summary(xs.map((x) => x.cpu))} ms`) +
        `; mean CPU terraform ${mean((x) => x.terraform)} ms, PostgreSQL ${mean((x) => x.postgres)} ms`,
    );
  }
  // The machine drifts over a run: each push over the `pg` push of its own round.
  const pg = times.get('pg');
  if (pg === undefined) return;
  for (const [label, xs] of times) {
    if (label === 'pg') continue;
    const ratios = xs.map((x, i) => x.ms / pg[i].ms).sort((a, b) => a - b);
    const at = (q: number) => ratios[Math.floor(q * (ratios.length - 1))].toFixed(3);
    console.log(
      `  ${label.padEnd(6)} over pg, per round: median ${at(0.5)} (quartiles ${at(0.25)}–${at(0.75)}), ` +
        `${ratios.filter((r) => r <= 1).length} of ${ratios.length} at or under 1`,
    );
  }
}

async function main(): Promise<void> {
  let sqlOut = '';
  await runProbe(
    'push-probe',
    async ({ tmp, pg, postmaster, agent, klds }) => {
      const running: Build[] = [];
      for (const { label, kld, databaseUrl } of klds) {
        const state = new SyntheticState({ instances: INSTANCES });
        const b: Build = {
          label,
          kld,
          url: `${kld.url}/v1/states/probe`,
          state,
          meter: postmaster
            ? new DatabaseCpuMeter(postmaster, new URL(databaseUrl).pathname.slice(1))
            : null,
          posted: Buffer.from(state.text()),
          wall: { LOCK: [], GET: [], POST: [], UNLOCK: [] },
          kldCpu: zero(),
          pgCpu: zero(),
          sql: {},
        };
        const first = await sendBytes(agent, 'POST', b.url, b.posted);
        if (first.status !== 200) throw new Error(`${label} first POST: ${first.status}`);
        running.push(b);
      }
      try {
        await measure(running, agent, sqlOut);
        if (PUSHES > 0) await pushes(tmp, pg.url, running, sqlOut, postmaster);
      } finally {
        for (const b of running) b.meter?.stop();
      }
    },
    (tmp) => {
      sqlOut = path.join(tmp, 'sql');
      process.env.KL_PROBE_SQL_OUT = sqlOut;
      process.env.KL_BENCH_KLD_NODE_ARGS = [
        process.env.KL_BENCH_KLD_NODE_ARGS ?? '',
        `-r ${path.join(__dirname, 'sql-count-preload.js')}`,
      ].join(' ');
    },
  );
}

const zero = () => ({ LOCK: 0, GET: 0, POST: 0, UNLOCK: 0 });

/** Per exchange, wall and CPU over ROUNDS rounds, after an untimed warm-up and one round of statements. */
async function measure(running: Build[], agent: http.Agent, sqlOut: string): Promise<void> {
  // Warm-up (JIT, caches) and the statements of one push, untimed.
  for (const b of running) {
    for (let n = 0; n < 3; n++) await round(b, agent, n, null);
    await round(b, agent, 3, sqlOut);
    b.wall = { LOCK: [], GET: [], POST: [], UNLOCK: [] };
    b.kldCpu = zero();
    b.pgCpu = zero();
  }
  console.log(
    `${INSTANCES} instances, ${ROUNDS} rounds of ${CHANGED} changed, load ${os.loadavg()[0].toFixed(1)}`,
  );
  // Besides each exchange's window, the whole run: what the builds do between
  // exchanges (projector loops, the document prepared after UNLOCK) counts too.
  const whole = running.map((b) => ({
    kld: processCpuMs(b.kld.pid),
    pg: b.meter?.totalMs() ?? 0,
  }));
  // The order alternates by round: a round's first place is not the same as its last.
  for (let n = 4; n < ROUNDS + 4; n++) {
    for (const b of n % 2 === 0 ? running : [...running].reverse()) await round(b, agent, n, null);
  }
  for (const [i, b] of running.entries()) {
    whole[i] = {
      kld: processCpuMs(b.kld.pid) - whole[i].kld,
      pg: (b.meter?.totalMs() ?? 0) - whole[i].pg,
    };
  }
  for (const [i, b] of running.entries()) {
    console.log(`${b.label}: wall min / median, kld and PostgreSQL CPU per exchange (mean)`);
    for (const x of EXCHANGES) {
      console.log(
        `  ${x.padEnd(6)} wall ${summary(b.wall[x])} ms, kld ${formatMs(b.kldCpu[x] / ROUNDS)} ms, ` +
          `PostgreSQL ${formatMs(b.pgCpu[x] / ROUNDS)} ms, ${b.sql[x]?.length ?? '?'} statements`,
      );
    }
    const total = (r: Record<Exchange, number>) => EXCHANGES.reduce((s, x) => s + r[x], 0) / ROUNDS;
    console.log(
      `  push   kld ${formatMs(total(b.kldCpu))} ms, PostgreSQL ${formatMs(total(b.pgCpu))} ms; ` +
        `whole run per push: kld ${formatMs(whole[i].kld / ROUNDS)} ms, ` +
        `PostgreSQL ${formatMs(whole[i].pg / ROUNDS)} ms`,
    );
  }
  if (process.env.KL_PROBE_SHOW_SQL === '1') {
    for (const b of running) {
      for (const x of EXCHANGES) {
        console.log(`${b.label} ${x}:\n    ${(b.sql[x] ?? []).join('\n    ')}`);
      }
    }
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
