import type { ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { openBenchDatabase } from './support/bench-database';
import { KldProcess, startKld } from './support/kld-process';
import { distribution } from './support/stats';
import { oneResourceState } from './support/one-resource-state';

/**
 * What state-engine slice readers that stop reading make kld hold: a state
 * of KL_BENCH_SIZE instances (each with KL_BENCH_PAD characters of padding),
 * KL_BENCH_READERS slice requests of all of it (one caller each, with
 * authentication off: X-Kilolock-Actor), each paused after its first bytes.
 * kld's RSS is sampled before them and while they hang; after KL_BENCH_WAIT_S
 * (75) seconds, how many kld cut off, and its heap in use (/metrics) and
 * RSS once two more slices were read whole. This build and
 * KL_BENCH_KLD_BEFORE (another build's dist/src/kld.js) take turns, each on
 * a fresh kld and database per round, KL_BENCH_ROUNDS (2) rounds.
 *
 *   npm run build && node dist/bench/silent-slice-readers.js
 */

const SIZE = Number(process.env.KL_BENCH_SIZE ?? 20_000);
const PAD = Number(process.env.KL_BENCH_PAD ?? 1000);
const READERS = Number(process.env.KL_BENCH_READERS ?? 10);
const ROUNDS = Number(process.env.KL_BENCH_ROUNDS ?? 2);
/** How long the readers hang: past kld's silent-reader bound (65 s). */
const WAIT_S = Number(process.env.KL_BENCH_WAIT_S ?? 75);
const MiB = 1024 * 1024;

function rssOf(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function stateDocument(): string {
  const attributes = (i: number) => ({ id: `id-${i}`, pad: String(i % 10).repeat(PAD) });
  return JSON.stringify(
    oneResourceState({ serial: 1, count: SIZE, lineage: 'silent-slices', attributes }),
  );
}

/** A slice request of the whole state whose first bytes came; the socket then stops reading. */
function silentReader(url: string, actor: string): Promise<net.Socket> {
  const { port } = new URL(url);
  const body = JSON.stringify({ selectors: [{ type: 'terraform_data' }] });
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), '127.0.0.1');
    socket.on('error', () => undefined);
    socket.once('data', () => {
      socket.pause();
      resolve(socket);
    });
    socket.once('close', () => reject(new Error('kld closed a slice before answering')));
    socket.write(
      `POST /v1/engine/states/bench/silent/slice HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
        `X-Kilolock-Actor: ${actor}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${body.length}\r\n\r\n${body}`,
    );
  });
}

const sliceBody = JSON.stringify({ selectors: [{ type: 'terraform_data' }] });

async function readWholeSlice(url: string): Promise<void> {
  const whole = await fetch(`${url}/v1/engine/states/bench/silent/slice`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: sliceBody,
  });
  await whole.text();
}

/** kld's JS heap in use, from its /metrics. */
async function heapUsed(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Number(/^nodejs_heap_size_used_bytes (\S+)$/m.exec(text)![1]);
}

/** Reads what is left; true if the answer came to its end (its last chunk). */
function readToEnd(socket: net.Socket): Promise<boolean> {
  return new Promise((resolve) => {
    let tail = '';
    const timer = setTimeout(() => socket.destroy(), 30_000);
    socket.on('data', (d: Buffer) => {
      tail = (tail + d.toString('latin1')).slice(-16);
      if (tail.endsWith('\r\n0\r\n\r\n')) socket.destroy();
    });
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(tail.endsWith('\r\n0\r\n\r\n'));
    });
    socket.resume();
  });
}

interface Figures {
  before: number;
  held: number;
  closed: number;
  heapAfter: number;
  rssAfter: number;
}

/**
 * One round on a fresh kld: RSS before, its peak while the readers hang,
 * then after WAIT_S how many readers kld cut off, and its heap and RSS once
 * a slice was read whole (so a collection ran).
 */
async function round(kld: KldProcess): Promise<Figures> {
  await readWholeSlice(kld.url);
  await sleep(1000);
  const before = rssOf(kld.pid);
  const sockets = await Promise.all(
    Array.from({ length: READERS }, (_, i) => silentReader(kld.url, `reader-${i}`)),
  );
  let held = 0;
  for (let i = 0; i < 10; i++) {
    await sleep(300);
    held = Math.max(held, rssOf(kld.pid));
  }
  await sleep(WAIT_S * 1000 - 3000);
  await readWholeSlice(kld.url);
  await readWholeSlice(kld.url);
  const heapAfter = await heapUsed(kld.url);
  const rssAfter = rssOf(kld.pid);
  // Read now: an answer kld cut off lacks the chunked encoding's last chunk.
  const whole = await Promise.all(sockets.map(readToEnd));
  return { before, held, closed: whole.filter((w) => !w).length, heapAfter, rssAfter };
}

async function main(): Promise<void> {
  const logger = pino({ level: 'warn' }, pino.destination(2));
  const builds: [string, string][] = [['this build', path.resolve(__dirname, '../src/kld.js')]];
  if (process.env.KL_BENCH_KLD_BEFORE) builds.unshift(['before', process.env.KL_BENCH_KLD_BEFORE]);
  const children = new Set<ChildProcess>();
  const figures = new Map<string, Figures[]>(builds.map(([label]) => [label, []]));
  const doc = stateDocument();
  console.log(
    `${SIZE} instances (${(doc.length / MiB).toFixed(1)} MiB), ${READERS} slice readers ` +
      `that stop after their first bytes, ${WAIT_S} s, ${ROUNDS} rounds; ` +
      `load ${os
        .loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}`,
  );
  const mib = (n: number) => `${(n / MiB).toFixed(0)} MiB`;
  for (let r = 0; r < ROUNDS; r++) {
    for (const [label, entry] of builds) {
      const db = await openBenchDatabase(logger, { migrate: false });
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-bench-silent-'));
      let kld: KldProcess | null = null;
      try {
        kld = await startKld({ kld: entry, databaseUrl: db.url, dataDir, children });
        const posted = await fetch(`${kld.url}/v1/states/bench/silent`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: doc,
        });
        if (posted.status !== 200) throw new Error(`${label}: commit answered ${posted.status}`);
        const f = await round(kld);
        figures.get(label)!.push(f);
        console.log(
          `round ${r + 1} ${label}: RSS ${mib(f.before)} before, ${mib(f.held)} with the ` +
            `readers hanging; after ${WAIT_S} s ${f.closed} of ${READERS} cut off by kld, ` +
            `heap in use ${mib(f.heapAfter)}, RSS ${mib(f.rssAfter)}`,
        );
      } finally {
        await kld?.stop();
        for (const child of children) child.kill('SIGKILL');
        fs.rmSync(dataDir, { recursive: true, force: true });
        await db.close();
      }
    }
  }
  for (const [label, rounds] of figures) {
    const p50 = (pick: (f: Figures) => number) => mib(distribution(rounds.map(pick)).p50);
    console.log(
      `${label} (medians): RSS before ${p50((f) => f.before)}, with the readers ` +
        `${p50((f) => f.held)}; after ${WAIT_S} s cut off ${rounds.map((f) => f.closed).join('/')}, ` +
        `heap in use ${p50((f) => f.heapAfter)}, RSS ${p50((f) => f.rssAfter)}`,
    );
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
