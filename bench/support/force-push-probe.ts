import { ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { EmbeddedPostgres } from '../../src/infrastructure/postgres/embedded-postgres';
import { openBenchDatabase } from './bench-database';
import { generateBigState } from './big-state-generator';
import { KldProcess, startKld } from './kld-process';
import {
  afterKldStarted,
  beforeKldStarts,
  describeDurability,
  logDurabilityOf,
} from './log-durability';
import { postmasterOf, processCpuMs, processTreeCpuMs, reapedChildrenCpuMs } from './process-cpu';
import { SyntheticState } from './state-generator';
import { formatMs, median as medianOf } from './stats';
import { terraformEnv } from './terraform-env';
import { walInsertPosition } from './wal-position';

/**
 * Probe: `terraform state push -force` of a big state into an empty state,
 * to terraform's `pg` backend and to one or more kld builds, taking turns
 * (the order turns each round), each push into a state of its own
 * (initialised untimed). Per push: the wall time, terraform's CPU,
 * PostgreSQL's CPU (the whole server) and kld's; for kld, the server time of
 * each request terraform sent (so terraform's own time is the rest) and the
 * big POST split into its stages (commit-stages-preload): wall, kld CPU and
 * the backends' CPU per stage, then the medians per build.
 *
 *   npm run build && node dist/bench/support/force-push-probe.js main=dist/src/kld.js \
 *     served=/path/to/proto/dist/src/kld.js+KL_PROTO_ANSWER=served
 *   KL_PROBE_STATE=big|wide  KL_PROBE_INSTANCES=20000  KL_PROBE_ROUNDS=3
 *   KL_PROBE_QUIET_MS=6000 (after a kld push: its after-work, recorded too)
 *   KL_PROBE_DETAIL=1 (every statement of each POST)
 *   KL_PROBE_READ_AFTER=1 (GET the state's resources right after each kld push, timed)
 *   KL_PROBE_BIG_BYTES=1048576 (the POST's size from which it is the one split into stages; below
 *     1 MiB for a small state; 0: every request's statements are recorded, and with
 *     KL_PROBE_DETAIL=1 printed from the push's first request, LOCK to UNLOCK)
 *
 * A build's `+KEY=VALUE` suffixes are set in its kld's environment only, but
 * for KL_PROBE_LOG=unlogged and KL_PROBE_SYNCHRONOUS_COMMIT=off, which set up
 * its database (bench-only variants, see log-durability.ts). Each push's WAL
 * (the server's insert position before and after) is printed with it.
 */

const ROUNDS = Number(process.env.KL_PROBE_ROUNDS ?? 3);
const INSTANCES = Number(process.env.KL_PROBE_INSTANCES ?? 20_000);
const QUIET_MS = Number(process.env.KL_PROBE_QUIET_MS ?? 6_000);
const DETAIL = process.env.KL_PROBE_DETAIL === '1';
const CHECK = process.env.KL_PROBE_READ_AFTER === '1';
const BIG = Number(process.env.KL_PROBE_BIG_BYTES ?? 1 << 20);

interface Stamp {
  t: number;
  cpu: number;
  main: number;
}
type Line =
  | ({ k: 'req'; n: number; method: string; url: string; size: number; at: string } & Stamp)
  | ({ k: 'mark'; at: string } & Stamp)
  | {
      k: 'sql';
      c: number;
      pid: number;
      text: string;
      start: Stamp & { pg: number };
      end: Stamp & { pg: number };
    };
type Sql = Extract<Line, { k: 'sql' }>;

/** One stage of a POST: from, to (ms after its arrival), kld CPU and main thread, backends' CPU. */
interface Stage {
  from: number;
  to: number;
  kld: number;
  main: number;
  pg: number;
}

interface Push {
  wall: number;
  terraform: number;
  postgres: number;
  kld: number;
  /** Bytes of WAL the server wrote during the push (every database's). */
  wal: number;
  /** Server time of every request terraform sent, and of the big POST alone. */
  served: number;
  post: number;
  stages: Map<string, Stage>;
  /** Each request's server time, in order. */
  requests?: string;
}

const children = new Set<ChildProcess>();

function run(cwd: string, env: NodeJS.ProcessEnv, args: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn('terraform', args, { cwd, env, stdio: ['ignore', 'ignore', 'pipe'] });
    children.add(child);
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      children.delete(child);
      if (code === 0) resolve(performance.now() - t0);
      else reject(new Error(`terraform ${args.join(' ')} in ${cwd}: ${err}`));
    });
  });
}

async function linesOf(kld: KldProcess, out: string): Promise<Line[]> {
  const file = `${out}.${kld.pid}`;
  fs.rmSync(file, { force: true });
  process.kill(kld.pid, 'SIGUSR2');
  for (let i = 0; i < 200 && !fs.existsSync(file); i++) await new Promise((r) => setTimeout(r, 10));
  await new Promise((r) => setTimeout(r, 30));
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Line);
}

/** Which read model (or the log) a transaction's statements write. */
function kindOf(texts: string[]): string {
  const all = texts.join(' ');
  if (/COPY kl_events|INSERT INTO kl_events/.test(all)) return 'log append';
  if (/raw_state/.test(all)) return 'served document';
  if (/COPY resources|INTO resources/.test(all)) return 'resources + outputs';
  if (/resource_edges|resource_dependencies/.test(all)) return 'edges';
  if (/state_versions|INTO states|UPDATE states/.test(all)) return 'versions (catalog)';
  if (/VACUUM|ANALYZE/.test(all)) return 'statistics';
  if (/kl_snapshots/.test(all)) return 'snapshot';
  return 'other';
}

/** The big POST's stages from its lines (times from its arrival). */
function stagesOf(lines: Line[]): {
  post: number;
  served: number;
  stages: Map<string, Stage>;
  requests: string;
} {
  const reqs = lines.filter((l): l is Extract<Line, { k: 'req' }> => l.k === 'req');
  const big = reqs.find(
    (r) => r.method === 'POST' && r.size >= Math.max(BIG, 1) && r.at === 'arrive',
  );
  if (!big) throw new Error('no big POST recorded');
  const at = (n: number, what: string) => reqs.find((r) => r.n === n && r.at === what)!;
  let served = 0;
  const each: string[] = [];
  // terraform's requests only (not the probe's own read after the push).
  for (const r of reqs.filter((x) => x.at === 'arrive' && x.url.startsWith('/v1/states/'))) {
    const answer = at(r.n, 'answer');
    if (answer) served += answer.t - r.t;
    each.push(`${r.method} ${answer ? formatMs(answer.t - r.t) : '?'}`);
  }
  const arrive = big;
  const body = at(big.n, 'body');
  const answer = at(big.n, 'answer');
  const mark = (name: string) =>
    lines.find((l): l is Extract<Line, { k: 'mark' }> => l.k === 'mark' && l.at === name);
  const bus = mark('bus CommitStateCommand');
  const d0 = mark('decide start');
  const d1 = mark('decide end');
  const sqls = lines.filter((l): l is Sql => l.k === 'sql' && l.start.t >= arrive.t);
  // Transactions per connection: from a BEGIN to its COMMIT / ROLLBACK.
  const txs: { kind: string; sql: Sql[] }[] = [];
  const open = new Map<number, Sql[]>();
  for (const s of [...sqls].sort((a, b) => a.start.t - b.start.t)) {
    const list = open.get(s.c) ?? [];
    list.push(s);
    open.set(s.c, list);
    if (
      /^(COMMIT|ROLLBACK)/i.test(s.text) ||
      (!/^BEGIN/i.test(list[0].text) && list.length === 1)
    ) {
      txs.push({ kind: kindOf(list.map((x) => x.text)), sql: list });
      open.delete(s.c);
    }
  }
  for (const list of open.values()) txs.push({ kind: kindOf(list.map((x) => x.text)), sql: list });
  const stages = new Map<string, Stage>();
  const window = (name: string, a: Stamp | undefined, b: Stamp | undefined) => {
    if (!a || !b) return;
    stages.set(name, {
      from: a.t - arrive.t,
      to: b.t - arrive.t,
      kld: (b.cpu - a.cpu) / 1000,
      main: b.main - a.main,
      pg: NaN,
    });
  };
  const append = txs.find((x) => x.kind === 'log append');
  const appendEnd = append?.sql[append.sql.length - 1].end;
  window('kld: body received', arrive, body);
  window('kld: parse', body, bus);
  window('kld: flatten + hash', bus, d0);
  window('kld: decide (delta)', d0, d1);
  window('kld: decide end to append committed', d1, appendEnd);
  window('kld: append committed to answer', appendEnd, answer);
  window('kld: whole POST', arrive, answer);
  // The after-work: up to the last thing recorded (5 s past the answer at most).
  const stamps = lines.map((l) => (l.k === 'sql' ? l.end : (l as Stamp)));
  const lastStamp = stamps.reduce((m, x) => (x.t > m.t ? x : m), answer as Stamp);
  window('kld: after the answer (5 s)', answer, lastStamp);
  const byKind = new Map<string, typeof txs>();
  for (const x of txs) {
    // What started after the answer is the after-work, apart.
    const kind = x.sql[0].start.t > answer.t ? `after: ${x.kind}` : x.kind;
    byKind.set(kind, [...(byKind.get(kind) ?? []), x]);
  }
  for (const [kind, list] of byKind) {
    const first = Math.min(...list.map((x) => x.sql[0].start.t));
    const end = Math.max(...list.map((x) => x.sql[x.sql.length - 1].end.t));
    const pg = list.reduce(
      (s, x) => s + (x.sql[x.sql.length - 1].end.pg - x.sql[0].start.pg || 0),
      0,
    );
    stages.set(`sql: ${kind}`, {
      from: first - arrive.t,
      to: end - arrive.t,
      kld: NaN,
      main: NaN,
      pg,
    });
  }
  if (DETAIL) {
    // With every request recorded (KL_PROBE_BIG_BYTES=0): the whole push, its requests among
    // its statements, times from the POST's arrival (negative before it).
    const all = BIG === 0 ? lines : sqls;
    const events = all
      .filter((l) => l.k !== 'mark')
      .map((l) => ({ t: l.k === 'sql' ? l.start.t : (l as Stamp).t, l }))
      .sort((a, b) => a.t - b.t);
    for (const { l } of events) {
      if (l.k === 'sql')
        console.log(
          `      c${l.c} ${formatMs(l.start.t - arrive.t)}-${formatMs(l.end.t - arrive.t)} ` +
            `pg ${l.end.pg - l.start.pg} ${l.text.slice(0, 100)}`,
        );
      else if (l.k === 'req')
        console.log(`    ${formatMs(l.t - arrive.t)} ${l.at} ${l.method} ${l.url} ${l.size}`);
    }
  }
  return { post: answer.t - arrive.t, served, stages, requests: each.join(', ') };
}

function stateText(): string {
  if (process.env.KL_PROBE_STATE === 'wide')
    return new SyntheticState({ instances: INSTANCES }).text();
  return generateBigState({ size: Math.max(1, Math.round((INSTANCES - 8) / 2)) }).text;
}

async function main(): Promise<void> {
  const logger = pino({ level: 'warn' }, pino.destination(2));
  const builds = process.argv.slice(2).map((arg) => {
    const [head, ...envs] = arg.split('+');
    const [label, kld] = head.split('=');
    return { label, kld, ...logDurabilityOf(Object.fromEntries(envs.map((e) => e.split('=')))) };
  });
  if (builds.length === 0) throw new Error('give LABEL=path/to/kld.js[+KEY=VALUE…], one or more');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-force-push-'));
  const pgDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-force-push-pg-'));
  const out = path.join(tmp, 'stages');
  process.env.KL_PROBE_STAGES_OUT = out;
  process.env.KL_BENCH_KLD_NODE_ARGS = [
    process.env.KL_BENCH_KLD_NODE_ARGS ?? '',
    `-r ${path.join(__dirname, 'commit-stages-preload.js')}`,
  ].join(' ');
  const pg = await EmbeddedPostgres.start(pgDir, logger);
  process.env.KL_BENCH_DATABASE_URL = pg.url;
  const klds: { label: string; kld: KldProcess }[] = [];
  try {
    const postmaster = postmasterOf(pgDir) ?? 0;
    for (const b of builds) {
      const { url } = await openBenchDatabase(logger, { migrate: false });
      await beforeKldStarts(url, b.durability);
      const saved = { ...process.env };
      Object.assign(process.env, b.kldEnv);
      try {
        const kld = await startKld({
          kld: b.kld,
          databaseUrl: url,
          dataDir: path.join(tmp, `kld-${b.label}`),
          children,
        });
        await afterKldStarted(url, b.durability);
        klds.push({ label: b.label, kld });
      } finally {
        for (const k of Object.keys(b.kldEnv)) {
          if (saved[k] === undefined) delete process.env[k];
          else process.env[k] = saved[k];
        }
      }
    }
    const rc = path.join(tmp, 'terraformrc');
    fs.writeFileSync(rc, '\n');
    const env = terraformEnv(rc);
    const text = stateText();
    const file = path.join(tmp, 'push.tfstate');
    fs.writeFileSync(file, text);
    const conn = new URL(pg.url);
    conn.pathname = '/postgres';
    conn.searchParams.set('sslmode', 'disable');
    console.log(
      `state push -force into an empty state: ${process.env.KL_PROBE_STATE ?? 'big'} state, ` +
        `${(text.length / 2 ** 20).toFixed(1)} MiB, ${ROUNDS} rounds, load ${os.loadavg()[0].toFixed(1)}`,
    );
    for (const b of builds.filter((x) => describeDurability(x.durability)))
      console.log(`  ${b.label}: ${describeDurability(b.durability)} (bench-only)`);
    const targets = ['pg', ...klds.map((k) => k.label)];
    const pushes = new Map<string, Push[]>(targets.map((t) => [t, []]));
    for (let round = 0; round < ROUNDS; round++) {
      const order = targets.map((_, i) => targets[(i + round) % targets.length]);
      for (const label of order) {
        const k = klds.find((x) => x.label === label);
        const dir = path.join(tmp, `r${round}-${label}`);
        fs.mkdirSync(dir);
        const address = JSON.stringify(`${k?.kld.url}/v1/states/force-${round}`);
        fs.writeFileSync(
          path.join(dir, 'main.tf'),
          k
            ? `terraform {\n backend "http" {\n address = ${address}\n lock_address = ${address}\n unlock_address = ${address}\n }\n}\n`
            : `terraform {\n backend "pg" {\n conn_str = ${JSON.stringify(conn.toString())}\n schema_name = "force_${round}"\n }\n}\n`,
        );
        await run(dir, env, ['init', '-input=false', '-no-color']);
        if (k) await linesOf(k.kld, out);
        const wal0 = await walInsertPosition(pg.url);
        const [tf0, pg0, kld0] = [
          reapedChildrenCpuMs(),
          processTreeCpuMs(postmaster),
          k ? processCpuMs(k.kld.pid) : 0,
        ];
        const wall = await run(dir, env, ['state', 'push', '-force', '-no-color', file]);
        const push: Push = {
          wal: Number((await walInsertPosition(pg.url)) - wal0),
          wall,
          terraform: reapedChildrenCpuMs() - tf0,
          postgres: processTreeCpuMs(postmaster) - pg0,
          kld: k ? processCpuMs(k.kld.pid) - kld0 : 0,
          served: 0,
          post: 0,
          stages: new Map(),
        };
        if (k && CHECK) {
          // A reader right after the push: does it see every instance, and how long does it wait?
          const t0 = performance.now();
          const r = await fetch(`${k.kld.url}/v1/api/states/force-${round}/resources`);
          const body = (await r.json()) as unknown;
          if (r.status !== 200) console.log(`    ${JSON.stringify(body).slice(0, 300)}`);
          const n = Array.isArray(body)
            ? body.length
            : ((body as { resources?: unknown[] }).resources?.length ?? -1);
          console.log(
            `  round ${round + 1} ${label}: GET resources right after: ${r.status}, ${n} instances, ` +
              `${formatMs(performance.now() - t0)} ms`,
          );
        }
        if (k) {
          await new Promise((r) => setTimeout(r, QUIET_MS));
          Object.assign(push, stagesOf(await linesOf(k.kld, out)));
        } else await new Promise((r) => setTimeout(r, 1000));
        pushes.get(label)!.push(push);
        console.log(
          `  round ${round + 1} ${label.padEnd(8)} wall ${formatMs(wall)} ms, terraform CPU ` +
            `${formatMs(push.terraform)} ms, PostgreSQL CPU ${formatMs(push.postgres)} ms, ` +
            `WAL ${mib(push.wal)} MiB` +
            (k
              ? `, kld CPU ${formatMs(push.kld)} ms; kld served ${formatMs(push.served)} ms ` +
                `(${push.requests}), the rest ${formatMs(wall - push.served)} ms`
              : ''),
        );
      }
    }
    report(pushes);
  } finally {
    for (const k of klds) await k.kld.stop();
    for (const c of children) c.kill('SIGKILL');
    await pg.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
    fs.rmSync(pgDir, { recursive: true, force: true });
  }
}

const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(2);

const median = (xs: number[]) => medianOf(xs.filter((x) => !Number.isNaN(x)));
const spread = (xs: number[]) =>
  `${formatMs(median(xs))} (${formatMs(Math.min(...xs))}–${formatMs(Math.max(...xs))})`;

function report(pushes: Map<string, Push[]>): void {
  const pg = pushes.get('pg')!;
  console.log('\nmedian (min–max) per push');
  for (const [label, xs] of pushes) {
    const ratio = xs.map((x, i) => x.wall / pg[i].wall);
    console.log(
      `  ${label.padEnd(8)} wall ${spread(xs.map((x) => x.wall))} ms` +
        (label === 'pg' ? '' : `, ${spread(ratio)}× pg (same round)`) +
        `; terraform CPU ${spread(xs.map((x) => x.terraform))}, PostgreSQL CPU ${spread(xs.map((x) => x.postgres))}` +
        `, WAL ${mib(median(xs.map((x) => x.wal)))} MiB` +
        (label === 'pg'
          ? ''
          : `, kld CPU ${spread(xs.map((x) => x.kld))}; kld served ${spread(xs.map((x) => x.served))}, ` +
            `POST ${spread(xs.map((x) => x.post))}, terraform's rest ${spread(xs.map((x) => x.wall - x.served))}`),
    );
  }
  for (const [label, xs] of pushes) {
    if (label === 'pg') continue;
    console.log(`\n${label}: the POST's stages, median (ms from its arrival; CPU ms)`);
    const names = [...new Set(xs.flatMap((x) => [...x.stages.keys()]))];
    for (const name of names) {
      const of = (f: (s: Stage) => number) =>
        median(xs.map((x) => (x.stages.has(name) ? f(x.stages.get(name)!) : NaN)));
      console.log(
        `  ${name.padEnd(42)} ${formatMs(of((s) => s.from)).padStart(6)} → ${formatMs(of((s) => s.to)).padStart(6)}` +
          `  (${formatMs(of((s) => s.to - s.from)).padStart(6)} ms)` +
          `  kld ${formatMs(of((s) => s.kld)).padStart(6)} (main ${formatMs(of((s) => s.main))})` +
          `  pg ${formatMs(of((s) => s.pg)).padStart(6)}`,
      );
    }
  }
}

main().catch((err: unknown) => {
  for (const c of children) c.kill('SIGKILL');
  console.error(err);
  process.exit(1);
});
