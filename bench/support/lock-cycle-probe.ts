import { sendBytes } from './http-send';
import { lockInfoBody, runProbe } from './probe-harness';
import { processCpuMs } from './process-cpu';
import { SyntheticState } from './state-generator';

/**
 * Probe: kld's CPU for a `LOCK` and its `UNLOCK` and nothing else (no
 * commit, so no big document for the collector), for one or more kld builds,
 * one after the other, each on its own database of one embedded PostgreSQL.
 *
 *   node dist/bench/support/lock-cycle-probe.js base=/path/a/dist/src/kld.js new=dist/src/kld.js
 *   KL_PROBE_CYCLES=400
 */

const CYCLES = Number(process.env.KL_PROBE_CYCLES ?? 400);
const WARM_UP = 30;

async function main(): Promise<void> {
  await runProbe('lock-cycles', async ({ agent, klds }) => {
    for (const { label, kld } of klds) {
      const url = `${kld.url}/v1/states/lock-cycles`;
      const created = await sendBytes(
        agent,
        'POST',
        url,
        Buffer.from(new SyntheticState({ instances: 10 }).text()),
      );
      if (created.status !== 200) throw new Error(`${label} POST: ${created.status}`);
      const cycles = async (n: number) => {
        for (let i = 0; i < n; i++) {
          const info = lockInfoBody(`00000000-0000-4000-8000-${String(i).padStart(12, '0')}`, 'p');
          for (const method of ['LOCK', 'UNLOCK']) {
            const r = await sendBytes(agent, method, url, info);
            if (r.status !== 200) throw new Error(`${label} ${method}: ${r.status}`);
          }
        }
      };
      await cycles(WARM_UP);
      const cpu = processCpuMs(kld.pid);
      const started = performance.now();
      await cycles(CYCLES);
      console.log(
        `${label}: per LOCK and UNLOCK, kld CPU ${((processCpuMs(kld.pid) - cpu) / CYCLES).toFixed(2)} ms, ` +
          `wall ${((performance.now() - started) / CYCLES).toFixed(2)} ms`,
      );
    }
  });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
