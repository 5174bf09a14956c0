import type { ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { BenchDatabase, openBenchDatabase } from './support/bench-database';
import { KldProcess, startKld } from './support/kld-process';
import { distribution, formatMs } from './support/stats';
import { oneResourceState } from './support/one-resource-state';

/**
 * kld's memory while many callers read big state-engine slices at once: a
 * state of KL_BENCH_SIZE instances (each with KL_BENCH_PAD characters of
 * padding), and for each of KL_BENCH_LEVELS (1,4,10) that many slice
 * requests of all of it at once, each from a caller of its own (with
 * authentication off: X-Kilolock-Actor), read whole as fast as they come.
 * Per level, a fresh kld on the build's database (its RSS never shrinks
 * back): one slice read whole first, then kld's RSS before the level and its
 * peak during it (VmHWM, reset just before). At level 1, the single slice's
 * time to its first byte and to its end, over KL_BENCH_SINGLES (5) more
 * reads. This build and KL_BENCH_KLD_BEFORE (another build's
 * dist/src/kld.js) take turns at each level, KL_BENCH_ROUNDS (2) rounds; each
 * answer's SHA-256 is printed, the same for both builds.
 *
 *   npm run build && node dist/bench/concurrent-slices.js
 */

const SIZE = Number(process.env.KL_BENCH_SIZE ?? 20_000);
const PAD = Number(process.env.KL_BENCH_PAD ?? 1000);
const LEVELS = (process.env.KL_BENCH_LEVELS ?? '1,4,10').split(',').map(Number);
const ROUNDS = Number(process.env.KL_BENCH_ROUNDS ?? 2);
const SINGLES = Number(process.env.KL_BENCH_SINGLES ?? 5);
const MiB = 1024 * 1024;

function status(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const text = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(text)![1]) * 1024;
}

/** Resets the process's peak RSS (VmHWM) to its RSS now. */
function resetPeak(pid: number): void {
  fs.writeFileSync(`/proc/${pid}/clear_refs`, '5');
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function stateDocument(): string {
  return JSON.stringify(
    oneResourceState({
      serial: 1,
      count: SIZE,
      lineage: 'concurrent-slices',
      attributes: (i) => ({ id: `id-${i}`, pad: String(i % 10).repeat(PAD) }),
      outputs: { note: { value: 'ünïcødé', type: 'string' } },
    }),
  );
}

interface Read {
  firstByteMs: number;
  totalMs: number;
  bytes: number;
  sha: string;
}

/** One slice of the whole state, read to its end. */
async function readSlice(url: string, actor: string): Promise<Read> {
  const started = performance.now();
  const res = await fetch(`${url}/v1/engine/states/bench/slices/slice`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-Kilolock-Actor': actor },
    body: JSON.stringify({ selectors: [{ type: 'terraform_data' }] }),
  });
  if (res.status !== 200) throw new Error(`slice answered ${res.status}: ${await res.text()}`);
  const hash = createHash('sha256');
  let firstByteMs = NaN;
  let bytes = 0;
  const reader = res.body!.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (Number.isNaN(firstByteMs)) firstByteMs = performance.now() - started;
    bytes += value.length;
    hash.update(value);
  }
  return { firstByteMs, totalMs: performance.now() - started, bytes, sha: hash.digest('hex') };
}

interface LevelFigures {
  before: number;
  peak: number;
  /** The level's slowest request, to its end. */
  wallMs: number;
  singles: Read[];
  sha: string;
}

async function level(kld: KldProcess, n: number): Promise<LevelFigures> {
  const warm = await readSlice(kld.url, 'warm');
  await sleep(1000);
  const before = status(kld.pid, 'VmRSS');
  resetPeak(kld.pid);
  const started = performance.now();
  const reads = await Promise.all(
    Array.from({ length: n }, (_, i) => readSlice(kld.url, `reader-${i}`)),
  );
  const wallMs = performance.now() - started;
  const peak = status(kld.pid, 'VmHWM');
  for (const r of reads) {
    if (r.sha !== warm.sha) throw new Error('two reads of the same slice differ');
  }
  const singles: Read[] = [];
  if (n === 1) for (let i = 0; i < SINGLES; i++) singles.push(await readSlice(kld.url, 'single'));
  return { before, peak, wallMs, singles, sha: warm.sha };
}

async function main(): Promise<void> {
  const logger = pino({ level: 'warn' }, pino.destination(2));
  const builds: [string, string][] = [['this build', path.resolve(__dirname, '../src/kld.js')]];
  if (process.env.KL_BENCH_KLD_BEFORE) builds.unshift(['before', process.env.KL_BENCH_KLD_BEFORE]);
  const children = new Set<ChildProcess>();
  const doc = stateDocument();
  const load = () =>
    os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(' ');
  console.log(
    `${SIZE} instances (${(doc.length / MiB).toFixed(1)} MiB), levels ${LEVELS.join(', ')} ` +
      `slices at once, ${ROUNDS} rounds; load ${load()}`,
  );
  const mib = (b: number) => `${(b / MiB).toFixed(0)} MiB`;
  const dbs = new Map<string, BenchDatabase>();
  const dirs: string[] = [];
  const figures = new Map<string, LevelFigures[]>();
  const withKld = async <T>(label: string, entry: string, fn: (k: KldProcess) => Promise<T>) => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-bench-slices-'));
    dirs.push(dataDir);
    const kld = await startKld({ kld: entry, databaseUrl: dbs.get(label)!.url, dataDir, children });
    try {
      return await fn(kld);
    } finally {
      await kld.stop();
    }
  };
  try {
    for (const [label, entry] of builds) {
      dbs.set(label, await openBenchDatabase(logger, { migrate: false }));
      await withKld(label, entry, async (kld) => {
        const posted = await fetch(`${kld.url}/v1/states/bench/slices`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: doc,
        });
        if (posted.status !== 200) throw new Error(`${label}: commit answered ${posted.status}`);
      });
    }
    for (let r = 0; r < ROUNDS; r++) {
      for (const n of LEVELS) {
        // Taking turns: which build goes first alternates by round.
        const order = r % 2 === 0 ? builds : [...builds].reverse();
        for (const [label, entry] of order) {
          const f = await withKld(label, entry, (kld) => level(kld, n));
          const key = `${label}\u0000${n}`;
          figures.set(key, [...(figures.get(key) ?? []), f]);
          const singles = f.singles.length
            ? `; one slice: first byte p50 ${formatMs(distribution(f.singles.map((s) => s.firstByteMs)).p50)} ms, ` +
              `end p50 ${formatMs(distribution(f.singles.map((s) => s.totalMs)).p50)} ms`
            : '';
          console.log(
            `round ${r + 1}, ${n} at once, ${label}: RSS ${mib(f.before)} before, peak ${mib(f.peak)} ` +
              `(+${mib(f.peak - f.before)}), all read in ${formatMs(f.wallMs)} ms${singles}; ` +
              `sha256 ${f.sha.slice(0, 16)}; load ${load()}`,
          );
        }
      }
    }
  } finally {
    for (const child of children) child.kill('SIGKILL');
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
    for (const db of dbs.values()) await db.close();
  }
  console.log('medians (min–max) over rounds:');
  for (const n of LEVELS) {
    for (const [label] of builds) {
      const rounds = figures.get(`${label}\u0000${n}`) ?? [];
      const d = (pick: (f: LevelFigures) => number) => {
        const x = distribution(rounds.map(pick));
        return `${mib(x.p50)} (${mib(x.min)}–${mib(x.max)})`;
      };
      const ms = (xs: number[]) => {
        const x = distribution(xs);
        return `${formatMs(x.p50)} (${formatMs(x.min)}–${formatMs(x.max)}) ms`;
      };
      const singles = rounds.flatMap((f) => f.singles);
      console.log(
        `${n} at once, ${label}: peak over before ${d((f) => f.peak - f.before)}, peak ${d((f) => f.peak)}, ` +
          `all read in ${ms(rounds.map((f) => f.wallMs))}` +
          (singles.length
            ? `; one slice: first byte ${ms(singles.map((s) => s.firstByteMs))}, end ${ms(singles.map((s) => s.totalMs))}`
            : ''),
      );
    }
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
