import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { onPath } from '../test/support/terraform-aws';
import { openBenchDatabase } from './support/bench-database';
import { generateBigState } from './support/big-state-generator';
import { CountingProxy, ProxiedExchange, startCountingProxy } from './support/counting-proxy';
import { processCpuMs, reapedChildrenCpuMs } from './support/process-cpu';
import { httpBackend, Kld, killAll, mustRun, startKld, Timed } from './support/refresh-processes';
import { printMachine, printTable } from './support/report';
import { distribution, formatInt, formatMs, median, verdict } from './support/stats';

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
 *   KL_BENCH_PLAN_REPS=1         end-to-end plans per way (0: skip them)
 *   KL_BENCH_BASE_KL=path/kl.js  another build of kl: (c) run with it too, interleaved
 *                                with this build's (before/after of kl itself)
 *   KL_BENCH_KL_NODE_ARGS=…      node flags for the kl runs (`--cpu-prof --cpu-prof-dir=DIR`)
 *   KL_BENCH_APPLY_REPS=0        kl apply of a state-engine plan of the change, per build of
 *                                kl (this one and KL_BENCH_BASE_KL), interleaved: the
 *                                apply's requests on the wire and kld's CPU during it
 *   KL_BENCH_BASE_KLD=path/kld.js another build of kld (an older checkout's dist) on a
 *                                database of its own, its exchanges interleaved with this
 *                                build's: before/after in one run
 *
 * Per size, first the exchanges: the full trunk (`GET /v1/states/<name>`,
 * what terraform and `kl plan` on the full lane read), scope expansion of
 * one module (`module.shadow_herd`), the slice of that scope and its
 * closure, and a 1,000-instance slice; wall time of each HTTP exchange and
 * bytes moved.
 *
 * Then one one-resource change (examples/big-state with
 * `terraform_data.deployment_marker` moved to marker.tf and its input
 * changed; marker.tf is edited again before each round, as a user edits
 * before planning, and kl's cache directory starts empty) planned three
 * ways, each a child process timed wall clock, all
 * through a counting proxy in front of kld (bytes moved, routes called,
 * time of the scope and slice exchanges; a scope asked with its slice
 * counts as the scope's):
 *
 *   (a) terraform plan -target=terraform_data.deployment_marker (http backend)
 *   (b) KL_PROTOCOL=http          kl plan -f marker.tf
 *   (c) KL_PROTOCOL=state-engine  kl plan -f marker.tf
 *
 * The lane of (b) and (c) is printed twice: what kl reported (its output or
 * kl-plan.json naming a lane), and what the wire shows (a trunk GET or
 * /v1/engine slices), so the figures say which code really ran.
 */

const SIZES = (process.env.KL_BENCH_SIZES ?? '10000,50000')
  .split(',')
  .map((s) => Number(s.trim()))
  .filter((n) => Number.isSafeInteger(n) && n > 0);
const REPS = Number(process.env.KL_BENCH_REPS ?? 20);
const ROOT = path.resolve(__dirname, '../..');
const KLD = path.join(ROOT, 'dist/src/kld.js');
const KL = path.join(ROOT, 'dist/src/cli/kl.js');
const PLAN_REPS = Number(process.env.KL_BENCH_PLAN_REPS ?? 1);
/** Another build's kl (an older checkout's dist/src/cli/kl.js): (c) again with it, interleaved. */
const BASE_KL = process.env.KL_BENCH_BASE_KL;
/** Node flags for the `kl plan` runs, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`. */
const APPLY_REPS = Number(process.env.KL_BENCH_APPLY_REPS ?? 0);
const KL_NODE_ARGS = (process.env.KL_BENCH_KL_NODE_ARGS ?? '').split(' ').filter((a) => a !== '');
const SLICE_TARGET_MS = 200;
const PLAN_TARGET_RATIO = 5;
const EXAMPLE = path.join(ROOT, 'examples/big-state');
const MARKER = 'terraform_data.deployment_marker';

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
  }).catch((err: unknown) => {
    // fetch's own message ("fetch failed") hides why.
    throw new Error(`${url}: ${String((err as Error).cause ?? err)}`);
  });
  const text = await res.text();
  const ms = performance.now() - t0;
  if (!res.ok) throw new Error(`${url}: ${res.status} ${text.slice(0, 300)}`);
  return { ms, bytes: Buffer.byteLength(text), text };
}

const BASE_KLD = process.env.KL_BENCH_BASE_KLD;

interface Server {
  build: string;
  kld: Kld;
}

interface Measured {
  label: string;
  build: string;
  bytes: number;
  min: number;
  p50: number;
  p99: number;
  /** kld's own CPU (user + system) per exchange, mean over the reps (10 ms ticks). */
  cpu: number;
}

/**
 * The same exchange on every server, interleaved (the order alternates each
 * rep), so that load on a shared machine falls on all alike: wall time of
 * each, and kld's CPU time, which load distorts less.
 */
async function measure(label: string, servers: Server[], route: string, body?: unknown) {
  const samples = servers.map(() => ({ ms: [] as number[], cpu: 0, bytes: 0 }));
  for (const s of servers) await exchange(`${s.kld.url}${route}`, body); // warm
  for (let i = 0; i < REPS; i++) {
    const order = servers.map((_, j) => j);
    if (i % 2 === 1) order.reverse();
    for (const j of order) {
      const { kld } = servers[j];
      const cpu0 = processCpuMs(kld.pid);
      const e = await exchange(`${kld.url}${route}`, body);
      samples[j].cpu += processCpuMs(kld.pid) - cpu0;
      samples[j].ms.push(e.ms);
      samples[j].bytes = e.bytes;
    }
  }
  return servers.map((s, j): Measured => {
    const d = distribution(samples[j].ms);
    return {
      label,
      build: s.build,
      bytes: samples[j].bytes,
      min: Math.min(...samples[j].ms),
      p50: d.p50,
      p99: d.p99,
      cpu: samples[j].cpu / REPS,
    };
  });
}

async function main(): Promise<void> {
  const logger = pino({ level: 'warn' });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-bench-engine-'));
  const bench = await openBenchDatabase(logger);
  const baseBench = BASE_KLD ? await openBenchDatabase(logger, { migrate: false }) : undefined;
  const servers: Server[] = [];
  try {
    printMachine();
    const kld = await startKld(KLD, bench.url, path.join(tmp, 'kld'));
    servers.push({ build: 'this build', kld });
    if (BASE_KLD && baseBench) {
      const baseKld = await startKld(BASE_KLD, baseBench.url, path.join(tmp, 'kld-base'));
      servers.push({ build: `base (${BASE_KLD})`, kld: baseKld });
    }
    for (const size of SIZES) {
      const state = generateBigState({ size });
      const name = `bench/engine-${size}`;
      const file = path.join(tmp, `state-${size}.json`);
      fs.writeFileSync(file, state.text);
      for (const s of servers) {
        const t0 = performance.now();
        await mustRun(
          'kl import',
          process.execPath,
          [KL, '--server', s.kld.url, 'import', file, '--name', name],
          { cwd: tmp, env: process.env, timeoutMs: 1_800_000 },
        );
        console.log(
          `size ${formatInt(size)}: imported into ${s.build} in ${formatMs(performance.now() - t0)} ms`,
        );
      }
      const base = `${kld.url}/v1/engine/states/${name}`;
      const route = `/v1/engine/states/${name}`;
      const scope = { module_prefixes: ['module.shadow_herd'] };
      // What kl plan -f marker.tf sends: the marker and the support block it reads, whose
      // dependents are the primary herd's leader and, through it, every tag and label.
      const markerScope = { addresses: [MARKER, 'terraform_data.deployment_id'] };
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
      // The scope with its slice in one answer, where every server offers it (an older kld
      // refuses the `slice` member).
      const combined = (
        await Promise.all(
          servers.map(
            async (s) =>
              (
                JSON.parse((await exchange(`${s.kld.url}/v1/engine`)).text) as {
                  operations: string[];
                }
              ).operations,
          ),
        )
      ).every((ops) => ops.includes('scope-slice'));
      const measured = [
        await measure('full trunk (GET /v1/states)', servers, `/v1/states/${name}`),
        await measure('scope expansion (module.shadow_herd)', servers, `${route}/scope`, scope),
        await measure(
          'scope expansion (marker + deployment_id)',
          servers,
          `${route}/scope`,
          markerScope,
        ),
        await measure('slice: scope + closure', servers, `${route}/slice`, sliceOfScope),
        ...(combined
          ? [
              await measure('scope (marker) with its slice', servers, `${route}/scope`, {
                ...markerScope,
                slice: true,
              }),
              await measure('slice (marker) alone', servers, `${route}/slice`, markerScope),
            ]
          : []),
        await measure(
          `slice: ${thousand.addresses.length} instances`,
          servers,
          `${route}/slice`,
          thousand,
        ),
      ];
      const rows = measured.map((m) => m[0]);
      console.log(
        `\nsize ${formatInt(size)}: ${formatInt(state.instanceCount)} instances, ` +
          `${(state.text.length / 1048576).toFixed(1)} MiB; scope: ${expanded.scope.length} resources, ` +
          `closure ${expanded.closure.length}, provably safe: ${expanded.provably_safe}`,
      );
      printTable(
        ['exchange', 'build', 'bytes', 'min ms', 'p50 ms', 'p99 ms', 'kld CPU ms/op'],
        measured
          .flat()
          .map((r) => [
            r.label,
            r.build,
            formatInt(r.bytes),
            formatMs(r.min),
            formatMs(r.p50),
            formatMs(r.p99),
            formatMs(r.cpu),
          ]),
      );
      const full = rows[0];
      const slice = rows[3];
      const thousandRow = rows[rows.length - 1];
      console.log(
        `  scope slice vs trunk: ${(full.bytes / slice.bytes).toFixed(0)}× fewer bytes, ` +
          `${(full.p50 / slice.p50).toFixed(1)}× faster (p50)`,
      );
      console.log(
        `  target: ${thousand.addresses.length}-instance slice p99 ≤ ${SLICE_TARGET_MS} ms: ` +
          `${formatMs(thousandRow.p99)} ms ${verdict(thousandRow.p99 <= SLICE_TARGET_MS)}`,
      );
      if (PLAN_REPS > 0) await planThreeWays(kld, name, size, tmp);
      console.log(
        `  load now: ${os
          .loadavg()
          .map((l) => l.toFixed(2))
          .join(' ')} (1/5/15 min)`,
      );
    }
  } finally {
    for (const s of servers) await s.kld.stop();
    await killAll();
    await bench.close();
    await baseBench?.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/**
 * examples/big-state at `size`, its marker resource in marker.tf with one
 * more input attribute (one in-place update), backend pointing at `url`.
 */
function writeConfiguration(dir: string, size: number, url: string, state: string): void {
  fs.cpSync(path.join(EXAMPLE, 'modules'), path.join(dir, 'modules'), { recursive: true });
  const main = fs.readFileSync(path.join(EXAMPLE, 'main.tf'), 'utf8');
  const marker =
    /resource "terraform_data" "deployment_marker" \{\n {2}input = \{\n(?: {4}.*\n)+ {2}\}\n\}\n/;
  const block = marker.exec(main)?.[0];
  const sizeDefault = /(variable "size" \{[^}]*default\s*=\s*)\d+/;
  if (block === undefined || !sizeDefault.test(main)) {
    throw new Error(
      'examples/big-state/main.tf changed: the bench cannot find var.size or the marker',
    );
  }
  fs.writeFileSync(
    path.join(dir, 'main.tf'),
    main.replace(sizeDefault, `$1${size}`).replace(block, ''),
  );
  fs.writeFileSync(path.join(dir, 'marker.tf.template'), block);
  editMarker(dir, 0);
  fs.writeFileSync(path.join(dir, 'backend.tf'), `terraform {\n${httpBackend(url, state)}}\n`);
}

/**
 * The one-resource change as a user makes it: marker.tf edited before each
 * round of plans (a new note each time), so a plan never finds the edited
 * file's text in kl's per-file read cache; the unchanged files may be there.
 */
function editMarker(dir: string, round: number): void {
  const block = fs.readFileSync(path.join(dir, 'marker.tf.template'), 'utf8');
  fs.writeFileSync(
    path.join(dir, 'marker.tf'),
    block.replace(
      '  input = {\n',
      `  input = {\n    note       = "planned by the bench, round ${round}"\n`,
    ),
  );
}

interface PlanRun {
  way: string;
  wallMs: number;
  /** CPU of the process and every process it waited for (terraform, its providers). */
  cpuMs: number;
  bytes: number;
  exchanges: ProxiedExchange[];
  /** What the plan says it changes. */
  changes: string;
  /** The lane kl named, if it named one. */
  reported: string;
}

/** The lane the wire shows: a trunk read, /v1/engine slices (alone or in a scope's answer), or both. */
function wireLane(exchanges: ProxiedExchange[], state: string): string {
  const trunk = exchanges.some((e) => e.method === 'GET' && e.path === `/v1/states/${state}`);
  const engine = exchanges.some(
    (e) => e.path.startsWith('/v1/engine/') && e.sliceInstances !== undefined,
  );
  if (trunk && engine) return 'both (trunk GET and engine slice)';
  if (engine) return 'state-engine (slice, no trunk GET)';
  return trunk ? 'full trunk (GET /v1/states)' : 'none';
}

function routes(exchanges: ProxiedExchange[], state: string): string {
  const counts = new Map<string, number>();
  for (const e of exchanges) {
    const route = `${e.method} ${e.path.replace(state, '<state>').replace(/\/runs\/[^/]+/, '/runs/<id>')}`;
    counts.set(route, (counts.get(route) ?? 0) + 1);
  }
  return [...counts].map(([r, n]) => (n > 1 ? `${r} ×${n}` : r)).join(', ');
}

/** Whatever kl says about its lane or protocol: its output, then kl-plan.json. */
function reportedLane(run: Timed, planFile: string): string {
  const said = `${run.stdout}\n${run.stderr}`
    .split('\n')
    .filter((l) => /\blane\b|protocol|state-engine/i.test(l))
    .map((l) => l.trim());
  let recorded: unknown;
  try {
    const plan = JSON.parse(fs.readFileSync(planFile, 'utf8')) as Record<string, unknown>;
    recorded = plan.lane ?? plan.protocol;
  } catch {
    recorded = undefined;
  }
  const parts = [
    ...said,
    ...(recorded === undefined ? [] : [`kl-plan.json lane: ${JSON.stringify(recorded)}`]),
  ];
  return parts.length > 0 ? parts.join(' | ') : 'nothing (kl named no lane)';
}

async function planThreeWays(kld: Kld, name: string, size: number, tmp: string): Promise<void> {
  const terraform = onPath('terraform', 'terraform 1.11');
  const proxy: CountingProxy = await startCountingProxy(kld.url);
  try {
    const dir = path.join(tmp, `cfg-${size}`);
    fs.mkdirSync(dir);
    writeConfiguration(dir, size, proxy.url, name);
    const tfrc = path.join(tmp, 'terraformrc');
    fs.writeFileSync(tfrc, 'disable_checkpoint = true\n');
    const env: NodeJS.ProcessEnv = {
      ...Object.fromEntries(
        Object.entries(process.env).filter(([k]) => !k.startsWith('TF_') && !k.startsWith('KL_')),
      ),
      TF_CLI_CONFIG_FILE: tfrc,
      CHECKPOINT_DISABLE: '1',
      TF_IN_AUTOMATION: '1',
      KL_TERRAFORM: terraform,
      // kl's cache starts empty: the first round's kl plans read every file.
      KL_CACHE_DIR: path.join(tmp, `kl-cache-${size}`),
    };
    const opts = { cwd: dir, env, timeoutMs: 1_800_000 };
    await mustRun('terraform init', terraform, ['init', '-input=false', '-no-color'], opts);
    proxy.take();

    const ways: { way: string; run: () => Promise<PlanRun> }[] = [
      {
        way: '(a) terraform plan -target',
        run: async () => {
          const r = await mustRun(
            'terraform plan -target',
            terraform,
            ['plan', '-input=false', '-no-color', `-target=${MARKER}`],
            opts,
          );
          const planned = /Plan: .*/.exec(r.stdout)?.[0] ?? 'no "Plan:" line';
          return {
            way: '',
            wallMs: r.ms,
            cpuMs: 0,
            bytes: 0,
            exchanges: [],
            changes: planned,
            reported: '-',
          };
        },
      },
      ...(
        [
          ['b', 'http', KL],
          ['c', 'state-engine', KL],
          ...(BASE_KL ? [['c-base', 'state-engine', BASE_KL]] : []),
        ] as const
      ).map(([letter, protocol, kl]) => ({
        way: `(${letter}) KL_PROTOCOL=${protocol} kl plan -f`,
        run: async (): Promise<PlanRun> => {
          const out = path.join(dir, `kl-plan-${letter}.json`);
          const r = await mustRun(
            `kl plan (${protocol})`,
            process.execPath,
            [
              ...KL_NODE_ARGS,
              kl,
              '--server',
              proxy.url,
              'plan',
              '-f',
              'marker.tf',
              '--state',
              name,
              '-o',
              out,
            ],
            { ...opts, env: { ...env, KL_PROTOCOL: protocol } },
          );
          const plan = JSON.parse(fs.readFileSync(out, 'utf8')) as {
            changes: { address: string; action: string }[];
          };
          const changes = plan.changes.map((c) => `${c.action} ${c.address}`).join(', ');
          return {
            way: '',
            wallMs: r.ms,
            cpuMs: 0,
            bytes: 0,
            exchanges: [],
            changes: changes || 'no changes',
            reported: reportedLane(r, out),
          };
        },
      })),
    ];
    const results: PlanRun[] = [];
    // Interleaved, so that load drifting during the run weighs on every way alike.
    for (let rep = 0; rep < PLAN_REPS; rep++) {
      editMarker(dir, rep);
      for (const { way, run } of ways) {
        proxy.take();
        const cpu0 = reapedChildrenCpuMs();
        const r = await run();
        const cpuMs = reapedChildrenCpuMs() - cpu0;
        const exchanges = proxy.take();
        results.push({
          ...r,
          cpuMs,
          way,
          exchanges,
          bytes: exchanges.reduce((n, e) => n + e.requestBytes + e.responseBytes, 0),
        });
      }
    }
    const serverMs = (r: PlanRun, suffix: string) => {
      const hits = r.exchanges.filter((e) => e.path.endsWith(suffix));
      return hits.length === 0 ? '-' : formatMs(hits.reduce((n, e) => n + e.ms, 0));
    };
    console.log(
      `\n  one-resource change (${MARKER}), ${PLAN_REPS} run(s) per way, wall clock of the process, CPU of it and every process it ran:`,
    );
    results.sort((x, y) => x.way.localeCompare(y.way));
    printTable(
      ['way', 'wall ms', 'CPU ms', 'bytes moved', 'expand ms', 'slice ms', 'lane on the wire'],
      results.map((r) => [
        r.way,
        formatMs(r.wallMs),
        formatMs(r.cpuMs),
        formatInt(r.bytes),
        serverMs(r, '/scope'),
        serverMs(r, '/slice'),
        wireLane(r.exchanges, name),
      ]),
    );
    for (const r of results) {
      console.log(`  ${r.way}: plans ${r.changes}`);
      console.log(`      routes: ${routes(r.exchanges, name)}`);
      if (r.reported !== '-') console.log(`      kl reported: ${r.reported}`);
    }
    const medianOf = (way: string, of: (r: PlanRun) => number) =>
      median(results.filter((r) => r.way.startsWith(way)).map(of));
    const wall = (r: PlanRun) => r.wallMs;
    const [a, b, c] = [medianOf('(a)', wall), medianOf('(b)', wall), medianOf('(c) ', wall)];
    console.log(
      `  wall medians: (a)/(b) = ${(a / b).toFixed(2)}×, (a)/(c) = ${(a / c).toFixed(2)}× ` +
        `(target (c) ≥ ${PLAN_TARGET_RATIO}× faster than (a)) ${verdict(a / c >= PLAN_TARGET_RATIO)}`,
    );
    const cpu = (r: PlanRun) => r.cpuMs;
    const [ca, cc] = [medianOf('(a)', cpu), medianOf('(c) ', cpu)];
    console.log(
      `  CPU medians (process and the processes it ran; less distorted by load): ` +
        `(a) ${formatMs(ca)} ms, (c) ${formatMs(cc)} ms, (a)/(c) = ${(ca / cc).toFixed(2)}×`,
    );
    if (BASE_KL) {
      const min = (way: string, of: (r: PlanRun) => number) =>
        Math.min(...results.filter((r) => r.way.startsWith(way)).map(of));
      console.log(
        `  (c) against (c-base) ${BASE_KL}, min / median: wall ${formatMs(min('(c) ', wall))} / ` +
          `${formatMs(c)} ms against ${formatMs(min('(c-base)', wall))} / ${formatMs(medianOf('(c-base)', wall))} ms, ` +
          `CPU ${formatMs(min('(c) ', cpu))} / ${formatMs(cc)} ms against ` +
          `${formatMs(min('(c-base)', cpu))} / ${formatMs(medianOf('(c-base)', cpu))} ms`,
      );
    }
    if (APPLY_REPS > 0) await applyOnTheLane(kld, proxy, dir, name, opts);
  } finally {
    await proxy.close();
  }
}

/**
 * `kl apply` of a state-engine plan of the one-resource change, with this
 * build of kl and KL_BENCH_BASE_KL's, interleaved: each round plans a new
 * edit of marker.tf with this build (the plan file is the same for both),
 * then applies it with one build through the proxy. What the apply asked
 * of kld (requests, bytes, the time of its scope and slice exchanges) and kld's CPU meanwhile.
 */
async function applyOnTheLane(
  kld: Kld,
  proxy: CountingProxy,
  dir: string,
  name: string,
  opts: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs: number },
): Promise<void> {
  const builds = [['this build', KL], ...(BASE_KL ? [[`base`, BASE_KL]] : [])] as const;
  const env = { ...opts.env, KL_PROTOCOL: 'state-engine' };
  const runs: { build: string; exchanges: ProxiedExchange[]; kldCpu: number; wall: number }[] = [];
  let round = 0;
  for (let rep = 0; rep < APPLY_REPS; rep++) {
    // The order alternates each rep, so drifting load falls on both builds alike.
    for (const [build, kl] of rep % 2 === 0 ? builds : [...builds].reverse()) {
      editMarker(dir, 10_000 + round++);
      const out = path.join(dir, 'kl-plan-apply.json');
      await mustRun(
        'kl plan (state-engine)',
        process.execPath,
        [KL, '--server', proxy.url, 'plan', '-f', 'marker.tf', '--state', name, '-o', out],
        { ...opts, env },
      );
      proxy.take();
      const cpu0 = processCpuMs(kld.pid);
      const r = await mustRun('kl apply', process.execPath, [kl, 'apply', out], {
        ...opts,
        env,
      });
      const kldCpu = processCpuMs(kld.pid) - cpu0;
      const exchanges = proxy.take();
      if (!/lane state-engine/.test(r.stdout + r.stderr)) {
        throw new Error(`kl apply (${build}) did not run on the trusted lane:\n${r.stdout}`);
      }
      runs.push({ build, exchanges, kldCpu, wall: r.ms });
    }
  }
  console.log(
    `\n  kl apply of a state-engine plan of the change, ${APPLY_REPS} per build, interleaved:`,
  );
  // What the apply waits for one after the other once it holds its reservations.
  const scopeAndSliceMs = (xs: ProxiedExchange[]) =>
    xs
      .filter((e) => e.path.endsWith('/scope') || e.path.endsWith('/slice'))
      .reduce((n, e) => n + e.ms, 0);
  const stat = (xs: number[]) => {
    const sorted = [...xs].sort((x, y) => x - y);
    return `${formatMs(sorted[0])} / ${formatMs(sorted[Math.floor(sorted.length / 2)])}`;
  };
  printTable(
    [
      'build',
      'requests',
      'bytes',
      'scope + slice ms, min / p50',
      'kld CPU ms, min / p50 / mean',
      'wall ms, min / p50',
    ],
    builds.map(([build]) => {
      const mine = runs.filter((r) => r.build === build);
      const first = mine[0].exchanges;
      return [
        build,
        formatInt(first.length),
        formatInt(first.reduce((n, e) => n + e.requestBytes + e.responseBytes, 0)),
        stat(mine.map((r) => scopeAndSliceMs(r.exchanges))),
        // 10 ms ticks: the mean over the rounds tells what the ticks hide.
        `${stat(mine.map((r) => r.kldCpu))} / ${formatMs(mine.reduce((n, r) => n + r.kldCpu, 0) / mine.length)}`,
        stat(mine.map((r) => r.wall)),
      ];
    }),
  );
  for (const [build] of builds) {
    const first = runs.find((r) => r.build === build)!;
    console.log(`  ${build}: ${routes(first.exchanges, name)}`);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:state-engine failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
