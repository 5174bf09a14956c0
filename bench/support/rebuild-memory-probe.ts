import { ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { openBenchDatabase } from './bench-database';
import { generateBigState } from './big-state-generator';
import { send } from './http-send';
import { startKld } from './kld-process';
import { processCpuMs } from './process-cpu';
import { printMachine, printTable } from './report';
import { distribution, formatInt } from './stats';

/**
 * kld's memory through a rebuild of many big states (`POST
 * /v1/admin/projections/rebuild`, as after a crash emptied unlogged read
 * models): one database holding `KL_PROBE_STATES` states of the big-state
 * example at `KL_PROBE_SIZE` (2 × size + 8 instances each, each of its own
 * content), then each build in turn, in rotating order: a fresh kld on that
 * database (empty caches), its resident set sampled every 20 ms through the
 * rebuild (peak), and once more 2 s after it (what it still holds). Prints
 * figures per round and min / median per build.
 *
 *   node dist/bench/support/rebuild-memory-probe.js base=/work/wt/base/dist/src/kld.js new=dist/src/kld.js
 *   KL_PROBE_STATES=20  KL_PROBE_SIZE=10000  KL_PROBE_ROUNDS=2
 *   KL_BENCH_DATABASE_URL=postgres://…  (else an embedded PostgreSQL for the run)
 */

const STATES = Number(process.env.KL_PROBE_STATES ?? 20);
const SIZE = Number(process.env.KL_PROBE_SIZE ?? 10_000);
const ROUNDS = Number(process.env.KL_PROBE_ROUNDS ?? 2);

interface Sample {
  build: string;
  baseMiB: number;
  peakMiB: number;
  afterMiB: number;
  cpuMs: number;
  wallMs: number;
}

function rssMiB(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return kb / 1024;
}

async function main(): Promise<void> {
  const builds = process.argv.slice(2).map((a) => {
    const [name, file] = a.split('=');
    return { name, file: path.resolve(file) };
  });
  if (builds.length === 0) throw new Error('usage: rebuild-memory-probe name=path/to/kld.js …');
  const logger = pino({ level: 'warn' }, pino.destination(2));
  const children = new Set<ChildProcess>();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-rebuild-memory-'));
  const db = await openBenchDatabase(logger);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    printMachine();
    console.log(`${STATES} states of ${formatInt(2 * SIZE + 8)} instances each`);
    const writer = await startKld({
      kld: builds[0].file,
      databaseUrl: db.url,
      dataDir: path.join(tmp, 'writer'),
      children,
    });
    let bytes = 0;
    for (let i = 0; i < STATES; i++) {
      const doc = Buffer.from(generateBigState({ size: SIZE, seed: 1 + i }).text);
      bytes += doc.length;
      const r = await send(agent, 'POST', `${writer.url}/v1/states/memory/s${i}`, doc);
      if (r.status !== 200) throw new Error(`POST s${i}: ${r.status} ${r.body.slice(0, 200)}`);
    }
    await writer.stop();
    console.log(`documents: ${(bytes / 2 ** 20).toFixed(1)} MiB in all`);

    const samples: Sample[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      for (let k = 0; k < builds.length; k++) {
        const build = builds[(round + k) % builds.length];
        const kld = await startKld({
          kld: build.file,
          databaseUrl: db.url,
          dataDir: path.join(tmp, `${build.name}-${round}`),
          children,
        });
        try {
          const baseMiB = rssMiB(kld.pid);
          let peakMiB = baseMiB;
          const sampler = setInterval(() => (peakMiB = Math.max(peakMiB, rssMiB(kld.pid))), 20);
          const cpu0 = processCpuMs(kld.pid);
          const r = await send(agent, 'POST', `${kld.url}/v1/admin/projections/rebuild`);
          clearInterval(sampler);
          if (r.status !== 200) throw new Error(`rebuild: ${r.status} ${r.body.slice(0, 200)}`);
          const cpuMs = processCpuMs(kld.pid) - cpu0;
          peakMiB = Math.max(peakMiB, rssMiB(kld.pid));
          await new Promise((res) => setTimeout(res, 2000));
          const s = {
            build: build.name,
            baseMiB,
            peakMiB,
            afterMiB: rssMiB(kld.pid),
            cpuMs,
            wallMs: r.ms,
          };
          samples.push(s);
          console.log(
            `round ${round} ${s.build}: RSS ${s.baseMiB.toFixed(0)} → peak ${s.peakMiB.toFixed(0)} MiB, ` +
              `${s.afterMiB.toFixed(0)} MiB 2 s after; rebuild ${formatInt(s.wallMs)} ms, kld CPU ${formatInt(s.cpuMs)} ms ` +
              `(load ${os.loadavg()[0].toFixed(1)})`,
          );
        } finally {
          await kld.stop();
        }
      }
    }
    const mm = (xs: number[]) => {
      const d = distribution(xs);
      return `${d.min.toFixed(0)} / ${d.p50.toFixed(0)}`;
    };
    printTable(
      ['build', 'peak RSS (MiB, min / median)', 'RSS 2 s after', 'kld CPU (ms)'],
      builds.map((b) => {
        const mine = samples.filter((s) => s.build === b.name);
        return [
          b.name,
          mm(mine.map((s) => s.peakMiB)),
          mm(mine.map((s) => s.afterMiB)),
          mm(mine.map((s) => s.cpuMs)),
        ];
      }),
    );
  } finally {
    for (const child of children) child.kill('SIGKILL');
    agent.destroy();
    await db.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
