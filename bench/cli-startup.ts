import { execFile, execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { BenchDatabase, openBenchDatabase } from './support/bench-database';
import { bigStateExpected, generateBigState } from './support/big-state-generator';
import { canonical, QUERIES, STATE_NAME } from './support/big-state-queries';
import { send } from './support/http-send';
import { Kld, killAll, mustRun, sql, startKld } from './support/refresh-processes';
import { printMachine, printTable } from './support/report';
import { distribution, formatInt, formatMs } from './support/stats';

/**
 * `kl` and `kld` start-up, wall clock and CPU time of the whole process,
 * against bare `node -e 0` in the same run (interleaved, so load on the
 * machine hits both alike). `kld --help` and `kld config` (no database) are
 * kld's command line alone: what an operator's script pays per call. `kl states` talks to a stub server in this process answering one
 * state, so that figure is kl's own cost, not kld's; then, against a real
 * kld holding the big-state example, `kl states` and `kl query` (inventory
 * by type) end to end, against `jq` answering the same question over the
 * state file.
 *
 *   npm run build && node dist/bench/cli-startup.js
 *
 *   KL_BENCH_REPS=15          runs of each command
 *   KL_BENCH_KL=path          another build of kl.js to measure (e.g. an older checkout's dist)
 *   KL_BENCH_KL_BASELINE=path also run every kl command with this kl.js, interleaved
 *                             (before/after in the same run; it talks to the same kld)
 *   KL_BENCH_KLD_BASELINE=path also run the kld commands with this kld.js, interleaved
 *   KL_BENCH_QUERY_SIZE=10000 var.size of the state `kl query` reads (2 × size + 8
 *                             instances); 0 skips kld, the database and jq
 *   KL_BENCH_DATABASE_URL     a PostgreSQL server for kld (else an embedded one)
 *
 * CPU is user + system of the child, from this process's /proc children
 * counters (10 ms ticks): what load on the machine distorts least.
 */

const REPS = Number(process.env.KL_BENCH_REPS ?? 15);
const QUERY_SIZE = Number(process.env.KL_BENCH_QUERY_SIZE ?? 10_000);
const TARGET_MS = 200;
const ROOT = path.resolve(__dirname, '../..');
const KL = process.env.KL_BENCH_KL ?? path.join(ROOT, 'dist/src/cli/kl.js');
const BASELINE = process.env.KL_BENCH_KL_BASELINE;
const KLD = path.join(ROOT, 'dist/src/kld.js');
const KLD_BASELINE = process.env.KL_BENCH_KLD_BASELINE;
const BY_TYPE = QUERIES.find((q) => q.key === 'by-type')!;

const ONE_STATE = {
  states: [
    {
      stateId: '00000000-0000-4000-8000-000000000001',
      name: 'team/prod/network',
      createdAt: '2026-01-01T00:00:00.000Z',
      updatedAt: '2026-01-01T00:00:00.000Z',
      version: 3,
      serial: 3,
      lineage: '00000000-0000-4000-8000-000000000002',
      terraformVersion: '1.11.4',
      instanceCount: 12,
      resourceCount: 7,
      lock: null,
    },
  ],
};

interface Case {
  label: string;
  command: string;
  args: string[];
  goal: string;
  /** Checks the output once, before timing: a fast wrong answer is no figure. */
  check?: (stdout: string) => void;
}

/** CPU (user + system) of this process's waited-for children so far, ms. */
function childrenCpuMs(): number {
  const text = fs.readFileSync('/proc/self/stat', 'utf8');
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // cutime and cstime, fields 16 and 17 of stat(5), in clock ticks (100 Hz).
  return (Number(fields[13]) + Number(fields[14])) * 10;
}

function run(c: Case): Promise<{ wallMs: number; cpuMs: number; stdout: string }> {
  const cpu0 = childrenCpuMs();
  const started = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    execFile(
      c.command,
      c.args,
      { env: { ...process.env, KL_TOKEN: '' }, maxBuffer: 1 << 26 },
      (err, stdout) => {
        if (err) return reject(new Error(`${c.label}: ${err.message}`));
        const wallMs = Number(process.hrtime.bigint() - started) / 1e6;
        resolve({ wallMs, cpuMs: childrenCpuMs() - cpu0, stdout });
      },
    );
  });
}

function stubServer(): Promise<http.Server> {
  const stub = http.createServer((req, res) => {
    const found = req.url === '/v1/api/states';
    res.writeHead(found ? 200 : 404, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(found ? ONE_STATE : { error: { code: 'X', message: 'not found' } }));
  });
  return new Promise((resolve) => stub.listen(0, '127.0.0.1', () => resolve(stub)));
}

function jqVersion(): string | null {
  try {
    return execFileSync('jq', ['--version'], { encoding: 'utf8' }).trim();
  } catch {
    return null;
  }
}

/** A kld holding the big-state example at QUERY_SIZE, its read models complete and analyzed. */
async function kldWithBigState(
  tmp: string,
  undo: (() => Promise<void>)[],
): Promise<{ kld: Kld; file: string; instances: number }> {
  const logger = pino({ level: 'warn' });
  const bench: BenchDatabase = await openBenchDatabase(logger);
  undo.push(() => bench.close());
  const state = generateBigState({ size: QUERY_SIZE });
  const file = path.join(tmp, 'state.json');
  fs.writeFileSync(file, state.text);
  const kld = await startKld(KLD, bench.url, path.join(tmp, 'kld'));
  undo.push(() => kld.stop());
  await mustRun('kl import', process.execPath, [KL, 'import', file, '--name', STATE_NAME], {
    cwd: tmp,
    env: { ...process.env, KL_SERVER_URL: kld.url, KL_TOKEN: '' },
    timeoutMs: 600_000,
  });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const count = Buffer.from(
      JSON.stringify({
        sql: `SELECT count(*)::int FROM current_resources WHERE state_name = '${STATE_NAME}'`,
      }),
    );
    const deadline = Date.now() + 300_000;
    for (;;) {
      const r = await send(agent, 'POST', `${kld.url}/v1/query`, count);
      const rows = r.status === 200 ? (JSON.parse(r.body) as { rows: number[][] }).rows : [[0]];
      if (rows[0][0] === state.instanceCount) break;
      if (Date.now() > deadline) throw new Error(`read models incomplete after 300 s: ${r.body}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  } finally {
    agent.destroy();
  }
  // Autovacuum would analyze within a minute; the figures are of the steady state.
  await sql(bench.url, 'ANALYZE resources, resource_edges, states');
  return { kld, file, instances: state.instanceCount };
}

async function main(): Promise<void> {
  const undo: (() => Promise<void>)[] = [];
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-bench-cli-'));
  undo.push(async () => fs.rmSync(tmp, { recursive: true, force: true }));
  const cleanup = async () => {
    await killAll();
    for (const step of undo.reverse()) await step().catch(() => undefined);
  };
  process.once('SIGINT', () => void cleanup().then(() => process.exit(130)));
  try {
    const stub = await stubServer();
    undo.push(() => new Promise((resolve) => stub.close(() => resolve())));
    const server = `http://127.0.0.1:${(stub.address() as AddressInfo).port}`;
    const node = process.execPath;
    const cases: Case[] = [
      { label: 'node -e 0', command: node, args: ['-e', '0'], goal: '' },
      { label: 'kl --help', command: node, args: [KL, '--help'], goal: `≤ ${TARGET_MS} ms wall` },
      {
        label: 'kl states (stub server)',
        command: node,
        args: [KL, '--server', server, 'states'],
        goal: `≤ ${TARGET_MS} ms wall`,
        check: (out) => {
          if (!out.includes('team/prod/network')) throw new Error(`kl states: ${out}`);
        },
      },
      { label: 'kl refresh --help', command: node, args: [KL, 'refresh', '--help'], goal: '' },
      { label: 'kl plan --help', command: node, args: [KL, 'plan', '--help'], goal: '' },
      {
        label: 'kld --help',
        command: node,
        args: [KLD, '--help'],
        goal: `≤ ${TARGET_MS} ms wall`,
        check: (out) => {
          if (!out.startsWith('Usage: kld')) throw new Error(`kld --help: ${out}`);
        },
      },
      {
        label: 'kld config',
        command: node,
        args: [KLD, 'config'],
        goal: `≤ ${TARGET_MS} ms wall`,
        check: (out) => {
          if (!out.includes('KL_LISTEN')) throw new Error(`kld config: ${out}`);
        },
      },
    ];
    console.log(`kl and kld start-up, ${REPS} runs each, interleaved: ${KL}, ${KLD}`);
    const jq = QUERY_SIZE > 0 ? jqVersion() : null;
    if (QUERY_SIZE > 0) {
      const t0 = performance.now();
      const { kld, file, instances } = await kldWithBigState(tmp, undo);
      const expected = canonical(bigStateExpected(QUERY_SIZE).byType);
      console.log(
        `kld: the big-state example at size ${formatInt(QUERY_SIZE)} (${formatInt(instances)} ` +
          `instances, ${(fs.statSync(file).size / 2 ** 20).toFixed(1)} MiB) imported and analyzed ` +
          `in ${formatMs(performance.now() - t0)} ms; jq: ${jq ?? 'not on PATH'}`,
      );
      cases.push({
        label: 'kl states (kld, 1 state)',
        command: node,
        args: [KL, '--server', kld.url, 'states'],
        goal: `≤ ${TARGET_MS} ms wall`,
        check: (out) => {
          if (!out.includes(STATE_NAME)) throw new Error(`kl states: ${out}`);
        },
      });
      const json = [KL, '--server', kld.url, '--format', 'json', 'query', BY_TYPE.sql];
      cases.push({
        label: `kl query (${BY_TYPE.label})`,
        command: node,
        args: [KL, '--server', kld.url, 'query', BY_TYPE.sql],
        goal: 'faster than jq',
      });
      // The table is for people; the same query as JSON is the one checked.
      cases.push({
        label: 'kl query --format json',
        command: node,
        args: json,
        goal: 'faster than jq',
        check: (out) => {
          const rows = (JSON.parse(out) as { type: string; instances: number }[]).map((r) => [
            r.type,
            r.instances,
          ]);
          if (canonical(rows) !== expected) throw new Error(`kl query answered ${out}`);
        },
      });
      if (jq) {
        cases.push({
          label: `jq (${BY_TYPE.label})`,
          command: 'jq',
          args: ['-c', BY_TYPE.jq, file],
          goal: '',
          check: (out) => {
            if (canonical(JSON.parse(out)) !== expected) throw new Error(`jq answered ${out}`);
          },
        });
      }
    }
    const baselines = new Map([
      [KL, BASELINE],
      [KLD, KLD_BASELINE],
    ]);
    for (const [program, baseline] of baselines) {
      if (!baseline) continue;
      console.log(`baseline of ${path.basename(program)}: ${baseline}`);
      for (const c of [...cases]) {
        if (c.args[0] !== program) continue;
        const at = cases.indexOf(c) + 1;
        cases.splice(at, 0, {
          ...c,
          label: `${c.label} [baseline]`,
          args: [baseline, ...c.args.slice(1)],
        });
      }
    }
    printMachine();
    for (const c of cases) {
      const first = await run(c);
      c.check?.(first.stdout);
    }
    const wall = cases.map(() => [] as number[]);
    const cpu = cases.map(() => [] as number[]);
    for (let rep = 0; rep < REPS; rep++) {
      for (const [i, c] of cases.entries()) {
        const r = await run(c);
        wall[i].push(r.wallMs);
        cpu[i].push(r.cpuMs);
      }
    }
    const base = distribution(wall[0]).p50;
    printTable(
      ['command', 'wall p50 ms', 'min', 'max', 'p50 − node', 'CPU p50 ms', 'CPU min', 'goal'],
      cases.map((c, i) => {
        const d = distribution(wall[i]);
        const u = distribution(cpu[i]);
        return [
          c.label,
          formatMs(d.p50),
          formatMs(d.min),
          formatMs(d.max),
          i === 0 ? '' : formatMs(d.p50 - base),
          formatMs(u.p50),
          formatMs(u.min),
          c.goal,
        ];
      }),
    );
    const jqAt = cases.findIndex((c) => c.command === 'jq');
    const klAt = cases.findIndex((c) => c.label === `kl query (${BY_TYPE.label})`);
    if (jqAt >= 0 && klAt >= 0) {
      const ratio = distribution(wall[jqAt]).p50 / distribution(wall[klAt]).p50;
      console.log(`kl query vs jq, wall p50: ${ratio.toFixed(2)}× (goal: > 1×)`);
    }
    printMachine('after');
  } finally {
    await cleanup();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
