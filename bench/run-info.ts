import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { openBenchDatabase, openBenchServer } from './support/bench-database';
import { send } from './support/http-send';
import { Kld, killAll, startKld } from './support/refresh-processes';
import { printMachine, printTable } from './support/report';
import { SyntheticState } from './support/state-generator';
import { formatInt, formatMs } from './support/stats';

/**
 * A run's `info` against the number of globs it reserves (wave 19): on one
 * or two builds of kld, each on its own database of one embedded PostgreSQL,
 * one after the other.
 *
 *   (1) one state-engine run start reserving KL_BENCH_GLOBS globs with an
 *       `info` of KL_BENCH_INFO_MIB MiB (then finished): the start's wall
 *       time and kld's resident memory before, after and at its peak;
 *   (2) what `kl state rm` of N addresses sends, through the engine API:
 *       a run start writing those N addresses with `info.preview` one line
 *       per address (`- <address>`), then the commit deleting them (which
 *       releases the run), on a state of KL_BENCH_INSTANCES instances;
 *       wall time of each, for each N of KL_BENCH_RM.
 *
 *   npm run build && node dist/bench/run-info.js
 *   KL_BENCH_KLD=path/kld.js          the build measured (default: this one)
 *   KL_BENCH_KLD_BEFORE=path/kld.js   another build measured the same way
 *   KL_BENCH_GLOBS=200  KL_BENCH_INFO_MIB=1  KL_BENCH_INSTANCES=20000  KL_BENCH_RM=2000,5000
 */

const ROOT = path.resolve(__dirname, '../..');
const BUILDS: [string, string][] = [
  ['this build', process.env.KL_BENCH_KLD ?? path.join(ROOT, 'dist/src/kld.js')],
];
if (process.env.KL_BENCH_KLD_BEFORE) BUILDS.unshift(['before', process.env.KL_BENCH_KLD_BEFORE]);
const GLOBS = Number(process.env.KL_BENCH_GLOBS ?? 200);
const INFO_MIB = Number(process.env.KL_BENCH_INFO_MIB ?? 1);
const INSTANCES = Number(process.env.KL_BENCH_INSTANCES ?? 20_000);
const RM = (process.env.KL_BENCH_RM ?? '2000,5000')
  .split(',')
  .map((s) => Number(s.trim()))
  .filter((n) => Number.isSafeInteger(n) && n > 0);

const undo: (() => Promise<void> | void)[] = [];

async function cleanup(): Promise<void> {
  while (undo.length) await Promise.resolve(undo.pop()!()).catch(() => undefined);
  await killAll();
}

/** VmRSS and VmHWM (peak) of a process, MiB. */
function memory(pid: number): { rss: number; peak: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1]);
  return { rss: kib('VmRSS') / 1024, peak: kib('VmHWM') / 1024 };
}

interface Result {
  label: string;
  startMs: number;
  rssBefore: number;
  rssAfter: number;
  peak: number;
  rm: { n: number; startMs: number; commitMs: number }[];
}

async function measure(label: string, kldJs: string, tmp: string): Promise<Result> {
  const logger = pino({ level: 'warn' }, pino.destination(2));
  // Another build's kld migrates its own database: it refuses a migration it does not know.
  const db = await openBenchDatabase(logger, { migrate: label === 'this build' });
  undo.push(() => db.close());
  const kld: Kld = await startKld(kldJs, db.url, path.join(tmp, label.replace(/\W/g, '-')));
  undo.push(() => kld.stop());
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  undo.push(() => agent.destroy());
  const call = async (method: string, route: string, body?: unknown) => {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const r = await send(agent, method, `${kld.url}${route}`, payload);
    if (r.status >= 300) throw new Error(`${label} ${method} ${route}: ${r.status} ${r.body}`);
    return r;
  };
  const state = new SyntheticState({ instances: INSTANCES });
  const text = Buffer.from(state.text());
  const addresses = (n: number) => Array.from({ length: n }, (_, i) => `terraform_data.x[${i}]`);

  // (1) one run, GLOBS globs, a big info
  const first = await send(agent, 'POST', `${kld.url}/v1/states/bench/info`, text);
  if (first.status !== 200) throw new Error(`${label} POST bench/info: ${first.status}`);
  const before = memory(kld.pid);
  const start = await call('POST', '/v1/engine/states/bench/info/runs', {
    operation: 'bench',
    base_version: 1,
    write: addresses(GLOBS),
    info: { blob: 'x'.repeat(Math.round(INFO_MIB * 2 ** 20)) },
  });
  const after = memory(kld.pid);
  const runId = (JSON.parse(start.body) as { run_id: string }).run_id;
  await call('POST', `/v1/engine/states/bench/info/runs/${runId}/finish`, { status: 'failed' });
  console.log(
    `  ${label}: start of ${GLOBS} globs with ${INFO_MIB} MiB info ${formatMs(start.ms)} ms, ` +
      `kld RSS ${formatInt(before.rss)} -> ${formatInt(after.rss)} MiB (peak ${formatInt(after.peak)})`,
  );

  // (2) kl state rm of N addresses
  const rm: Result['rm'] = [];
  for (const n of RM) {
    const name = `bench/rm-${n}`;
    const posted = await send(agent, 'POST', `${kld.url}/v1/states/${name}`, text);
    if (posted.status !== 200) throw new Error(`${label} POST ${name}: ${posted.status}`);
    const write = addresses(n);
    const s = await call('POST', `/v1/engine/states/${name}/runs`, {
      operation: 'state rm',
      base_version: 1,
      write,
      info: { preview: write.map((a) => `- ${a}`) },
    });
    const id = (JSON.parse(s.body) as { run_id: string }).run_id;
    const c = await call('POST', `/v1/engine/states/${name}/runs/${id}/commit`, {
      base_version: 1,
      terraform_version: '1.11.4',
      deletes: write,
    });
    rm.push({ n, startMs: s.ms, commitMs: c.ms });
    console.log(
      `  ${label}: state rm of ${formatInt(n)}: start ${formatMs(s.ms)} ms, commit ${formatMs(c.ms)} ms`,
    );
  }
  const result = {
    label,
    startMs: start.ms,
    rssBefore: before.rss,
    rssAfter: after.rss,
    peak: memory(kld.pid).peak,
    rm,
  };
  await kld.stop();
  return result;
}

async function main(): Promise<void> {
  const logger = pino({ level: 'warn' }, pino.destination(2));
  process.once('SIGINT', () => void cleanup().finally(() => process.exit(130)));
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-bench-run-info-'));
  undo.push(() => fs.rmSync(tmp, { recursive: true, force: true }));
  await openBenchServer(logger, undo, 'kl-bench-run-info');
  console.log("A run's info against its globs");
  printMachine();
  const results: Result[] = [];
  for (const [label, kldJs] of BUILDS) results.push(await measure(label, kldJs, tmp));
  printTable(
    [
      'build',
      `start, ${GLOBS} globs, ${INFO_MIB} MiB info`,
      'kld RSS before -> after',
      'kld peak RSS',
      ...RM.map((n) => `state rm ${formatInt(n)}: start + commit`),
    ],
    results.map((r) => [
      r.label,
      `${formatMs(r.startMs)} ms`,
      `${formatInt(r.rssBefore)} -> ${formatInt(r.rssAfter)} MiB`,
      `${formatInt(r.peak)} MiB`,
      ...r.rm.map((x) => `${formatMs(x.startMs)} + ${formatMs(x.commitMs)} ms`),
    ]),
  );
}

main()
  .then(cleanup)
  .catch(async (err: unknown) => {
    console.error(err);
    await cleanup();
    process.exit(1);
  });
