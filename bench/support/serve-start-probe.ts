import type { ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { startKld } from './kld-process';
import { runProbe } from './probe-harness';
import { processCpuMs } from './process-cpu';
import { distribution, formatMs } from './stats';

/**
 * Probe: what a restart of `kld serve` costs, on a database it migrated
 * before (every restart's case), for one or more kld builds in turns: the
 * time from its spawn to the first 200 of /readyz (asked every 10 ms), kld's
 * CPU up to then, and its first `GET /openapi.json` (wall and kld's CPU).
 * The documents the builds serve are compared byte for byte.
 *
 *   node dist/bench/support/serve-start-probe.js base=/path/a/dist/src/kld.js new=dist/src/kld.js
 *   KL_PROBE_ROUNDS=8
 *   KL_BENCH_KLD_NODE_ARGS="-r dist/bench/support/module-load-preload.js" KL_BENCH_MODULES_OUT=/tmp/x
 */

const ROUNDS = Number(process.env.KL_PROBE_ROUNDS ?? 8);

interface Sample {
  readyMs: number;
  cpuMs: number;
  openApiMs: number;
  openApiCpuMs: number;
}

/** Median (min–max), the median by nearest rank as stats.ts gives it: a value observed. */
const summary = (xs: number[]) => {
  const d = distribution(xs);
  return `${formatMs(d.p50)} (${formatMs(d.min)}–${formatMs(d.max)})`;
};

async function main(): Promise<void> {
  await runProbe('serve-start', async ({ tmp, klds }) => {
    // Each build migrated its database when the harness started it; from here on each start is a restart.
    for (const k of klds) await k.kld.stop();
    const children = new Set<ChildProcess>();
    const samples = new Map<string, Sample[]>(klds.map((k) => [k.label, []]));
    const documents = new Map<string, string>();
    try {
      for (let round = 0; round < ROUNDS; round++) {
        // Alternate who goes first: the machine's load drifts.
        const order = round % 2 === 0 ? klds : [...klds].reverse();
        for (const k of order) {
          const kld = await startKld({
            kld: k.entry,
            databaseUrl: k.databaseUrl,
            dataDir: path.join(tmp, k.label),
            children,
            pollMs: 10,
          });
          try {
            const cpuMs = processCpuMs(kld.pid);
            const t0 = performance.now();
            const r = await fetch(`${kld.url}/openapi.json`);
            const text = await r.text();
            const openApiMs = performance.now() - t0;
            if (r.status !== 200) throw new Error(`${k.label} /openapi.json: ${r.status}`);
            documents.set(k.label, text);
            samples.get(k.label)!.push({
              readyMs: kld.readyMs,
              cpuMs,
              openApiMs,
              openApiCpuMs: processCpuMs(kld.pid) - cpuMs,
            });
          } finally {
            await kld.stop();
          }
        }
      }
    } finally {
      for (const c of children) c.kill('SIGKILL');
    }
    const first = klds[0].label;
    for (const { label } of klds) {
      const s = samples.get(label)!;
      const ratio = (pick: (x: Sample) => number) =>
        summary(s.map((x, i) => pick(x) / pick(samples.get(first)![i])));
      console.log(
        `${label}: spawn → /readyz 200 ${summary(s.map((x) => x.readyMs))} ms, ` +
          `kld CPU to then ${summary(s.map((x) => x.cpuMs))} ms; ` +
          `first /openapi.json ${summary(s.map((x) => x.openApiMs))} ms, ` +
          `its kld CPU ${summary(s.map((x) => x.openApiCpuMs))} ms` +
          (label === first
            ? ''
            : `; per round over ${first}: ready ${ratio((x) => x.readyMs)}, ` +
              `CPU ${ratio((x) => x.cpuMs)}`),
      );
    }
    const bodies = [...documents.values()];
    console.log(
      bodies.every((b) => b === bodies[0])
        ? `/openapi.json: the same ${bodies[0].length} bytes from every build`
        : `/openapi.json DIFFERS: ${[...documents].map(([l, b]) => `${l} ${b.length} bytes`).join(', ')}`,
    );
    console.log(`${ROUNDS} rounds`);
  });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
