import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { openBenchDatabase } from './support/bench-database';
import { generateBigState } from './support/big-state-generator';
import { Kld, killAll, mustRun, startKld } from './support/refresh-processes';
import { printMachine, printTable } from './support/report';
import { distribution, formatInt, formatMs, verdict } from './support/stats';

/**
 * The state-engine lane against the Terraform lane on the big state
 * (examples/big-state topology) at each size: what a one-module change
 * reads. Prints figures and targets; never fails on a miss.
 *
 *   npm run bench:state-engine
 *
 *   KL_BENCH_SIZES=10000,50000   var.size per run: 2 × size + 8 instances (20k and 100k)
 *   KL_BENCH_REPS=20
 *   KL_BENCH_DATABASE_URL=…      else an embedded PostgreSQL
 *
 * Per size: the full trunk (`GET /v1/states/<name>`, what terraform and
 * `kl plan` on the full lane read), scope expansion of one module
 * (`module.shadow_herd`), the slice of that scope and its closure, and a
 * 1,000-instance slice; wall time of each HTTP exchange and bytes moved.
 *
 * Not measured here (yet): `terraform plan -target` and `kl plan -f` on
 * either lane end to end.
 */

const SIZES = (process.env.KL_BENCH_SIZES ?? '10000,50000')
  .split(',')
  .map((s) => Number(s.trim()))
  .filter((n) => Number.isSafeInteger(n) && n > 0);
const REPS = Number(process.env.KL_BENCH_REPS ?? 20);
const ROOT = path.resolve(__dirname, '../..');
const KLD = path.join(ROOT, 'dist/src/kld.js');
const KL = path.join(ROOT, 'dist/src/cli/kl.js');
const SLICE_TARGET_MS = 200;

interface Exchange {
  ms: number;
  bytes: number;
  text: string;
}

async function exchange(url: string, body?: unknown): Promise<Exchange> {
  const t0 = performance.now();
  const res = await fetch(url, {
    method: body === undefined ? 'GET' : 'POST',
    headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  const ms = performance.now() - t0;
  if (!res.ok) throw new Error(`${url}: ${res.status} ${text.slice(0, 300)}`);
  return { ms, bytes: Buffer.byteLength(text), text };
}

async function measure(label: string, url: string, body?: unknown) {
  await exchange(url, body); // warm
  const samples: number[] = [];
  let bytes = 0;
  for (let i = 0; i < REPS; i++) {
    const e = await exchange(url, body);
    samples.push(e.ms);
    bytes = e.bytes;
  }
  const d = distribution(samples);
  return { label, bytes, p50: d.p50, p99: d.p99 };
}

async function main(): Promise<void> {
  const logger = pino({ level: 'warn' });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-bench-engine-'));
  const bench = await openBenchDatabase(logger);
  let kld: Kld | undefined;
  try {
    printMachine();
    kld = await startKld(KLD, bench.url, path.join(tmp, 'kld'));
    for (const size of SIZES) {
      const state = generateBigState({ size });
      const name = `bench/engine-${size}`;
      const file = path.join(tmp, `state-${size}.json`);
      fs.writeFileSync(file, state.text);
      await mustRun(
        'kl import',
        process.execPath,
        [KL, '--server', kld.url, 'import', file, '--name', name],
        { cwd: tmp, env: process.env, timeoutMs: 900_000 },
      );
      const base = `${kld.url}/v1/engine/states/${name}`;
      const scope = { module_prefixes: ['module.shadow_herd'] };
      const expanded = JSON.parse((await exchange(`${base}/scope`, scope)).text) as {
        scope: unknown[];
        closure: { address: string }[];
        provably_safe: boolean;
      };
      const sliceOfScope = {
        module_prefixes: ['module.shadow_herd'],
        addresses: expanded.closure.map((c) => c.address),
      };
      const thousand = {
        addresses: Array.from(
          { length: Math.min(1000, size) },
          (_, i) => `module.primary_herd.terraform_data.tag[${i}]`,
        ),
      };
      const rows = [
        await measure('full trunk (GET /v1/states)', `${kld.url}/v1/states/${name}`),
        await measure('scope expansion (module.shadow_herd)', `${base}/scope`, scope),
        await measure('slice: scope + closure', `${base}/slice`, sliceOfScope),
        await measure(`slice: ${thousand.addresses.length} instances`, `${base}/slice`, thousand),
      ];
      console.log(
        `\nsize ${formatInt(size)}: ${formatInt(state.instanceCount)} instances, ` +
          `${(state.text.length / 1048576).toFixed(1)} MiB; scope: ${expanded.scope.length} resources, ` +
          `closure ${expanded.closure.length}, provably safe: ${expanded.provably_safe}`,
      );
      printTable(
        ['exchange', 'bytes', 'p50 ms', 'p99 ms'],
        rows.map((r) => [r.label, formatInt(r.bytes), formatMs(r.p50), formatMs(r.p99)]),
      );
      const full = rows[0];
      const slice = rows[2];
      console.log(
        `  scope slice vs trunk: ${(full.bytes / slice.bytes).toFixed(0)}× fewer bytes, ` +
          `${(full.p50 / slice.p50).toFixed(1)}× faster (p50)`,
      );
      console.log(
        `  target: ${thousand.addresses.length}-instance slice p99 ≤ ${SLICE_TARGET_MS} ms: ` +
          `${formatMs(rows[3].p99)} ms ${verdict(rows[3].p99 <= SLICE_TARGET_MS)}`,
      );
    }
  } finally {
    await kld?.stop();
    await killAll();
    await bench.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:state-engine failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
