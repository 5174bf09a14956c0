import { postgresSettings, printMachine, printTable } from './support/report';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import pino from 'pino';
import { Client } from 'pg';
import { BenchDatabase, openBenchDatabase } from './support/bench-database';
import {
  bigStateExpected,
  bigStateInstanceCount,
  generateBigState,
} from './support/big-state-generator';
import {
  BLAST_RADIUS_OVER_INSTANCE_EDGES,
  BLAST_RADIUS_SET,
  canonical,
  DemoQuery,
  QUERIES,
  STATE_NAME,
} from './support/big-state-queries';
import { Kld, killAll, mustRun, startKld, timed } from './support/refresh-processes';
import { distribution, Distribution, formatInt, formatMs, verdict } from './support/stats';
import { send } from './support/http-send';

/**
 * The big-state demo queries (docs/sql.md, examples/big-state) at size N,
 * server-side through `POST /v1/query` of a real `kld`, against `jq` over
 * the raw state file answering the same questions. Prints figures and
 * targets; never fails on a miss.
 *
 *   npm run build && node dist/bench/queries.js
 *
 *   KL_BENCH_DATABASE_URL=postgres://…   a server whose user may create databases
 *                                        (else an embedded PostgreSQL)
 *   KL_BENCH_SIZE=10000                  var.size: 2 × size + 8 instances
 *   KL_BENCH_QUERY_REPS=20  KL_BENCH_JQ_REPS=5
 *   KL_BENCH_AS_IMPORTED_TIMEOUT_MS=20000   how long the first, pre-ANALYZE run may take
 *
 * For each query: the HTTP round trip of `POST /v1/query` as the bench sees
 * it (the rows included), and the SQL's own time (planning + execution) from
 * `EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON)` sent the same way, so it runs
 * as `kl_reader` under the same settings; the two alternate. jq runs as a
 * child process, `jq -c '<filter>' state.json`, wall clock.
 */

const TARGET_RATIO = 20;
const SIZE = intEnv('KL_BENCH_SIZE', 10_000);
const REPS = intEnv('KL_BENCH_QUERY_REPS', 20);
const JQ_REPS = intEnv('KL_BENCH_JQ_REPS', 5);
const WARMUP = 3;
const QUERY_TIMEOUT_MS = 120_000;
const AS_IMPORTED_TIMEOUT_MS = intEnv('KL_BENCH_AS_IMPORTED_TIMEOUT_MS', 20_000);

const ROOT = path.resolve(__dirname, '../..');
const KLD = path.join(ROOT, 'dist/src/kld.js');
const KL = path.join(ROOT, 'dist/src/cli/kl.js');

/** Everything to undo, newest first; run once, on success, error or signal. */
const undo: { label: string; run: () => Promise<void> | void }[] = [];
let cleaning: Promise<void> | undefined;

function cleanup(): Promise<void> {
  return (cleaning ??= (async () => {
    await killAll();
    while (undo.length) {
      const step = undo.pop()!;
      try {
        await step.run();
      } catch (err) {
        process.stderr.write(`cleanup (${step.label}) failed: ${String(err)}\n`);
      }
    }
  })());
}

interface QueryResult {
  columns: { name: string; type: string }[];
  rows: unknown[][];
  truncated: boolean;
}

interface Measured {
  query: DemoQuery;
  roundTrip: Distribution;
  server: Distribution;
  planning: Distribution;
  execution: Distribution;
  jq: Distribution | null;
  ours: string;
  theirs: string | null;
  expected: string;
}

async function main(): Promise<void> {
  const logger = pino({ level: process.env.KL_LOG_LEVEL ?? 'warn' }, pino.destination(2));
  process.once('SIGINT', (s) => onSignal(s));
  process.once('SIGTERM', (s) => onSignal(s));
  const started = Date.now();

  try {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-bench-queries-'));
    undo.push({ label: 'temp dir', run: () => fs.rmSync(tmp, { recursive: true, force: true }) });
    const jq = jqVersion();
    const bench = await openBenchDatabase(logger);
    undo.push({ label: 'database', run: () => bench.close() });
    await printHeader(bench, jq);

    // --- the state ------------------------------------------------------------
    const t0 = performance.now();
    const state = generateBigState({ size: SIZE });
    const genMs = performance.now() - t0;
    const file = path.join(tmp, 'state.json');
    fs.writeFileSync(file, state.text);
    if (state.instanceCount !== bigStateInstanceCount(SIZE)) {
      throw new Error(`generator: ${state.instanceCount} instances, not 2 × ${SIZE} + 8`);
    }
    console.log(
      `State: examples/big-state at size ${formatInt(SIZE)}: ${formatInt(state.instanceCount)} ` +
        `instances in ${state.resourceCount} resources, ${formatInt(state.edgeCount)} dependency ` +
        `edges, ${mib(state.text.length)}; generated in ${formatMs(genMs)} ms`,
    );

    // --- kld, and `kl import` ---------------------------------------------------
    const kld: Kld = await startKld(KLD, bench.url, path.join(tmp, 'kld'));
    undo.push({ label: 'kld', run: () => kld.stop() });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    undo.push({ label: 'agent', run: () => agent.destroy() });
    console.log(`kld:   pid ${kld.pid}, ${kld.url}`);

    const imported = await mustRun(
      'kl import',
      process.execPath,
      [KL, '--server', kld.url, 'import', file, '--name', STATE_NAME],
      { cwd: tmp, env: { ...process.env, KL_SERVER_URL: kld.url }, timeoutMs: 600_000 },
    );
    const t1 = performance.now();
    const query = (sql: string, maxRows = 10_000) => postQuery(agent, kld.url, sql, maxRows);
    const visible = await waitForReadModels(query, state.instanceCount, state.edgeCount);
    const lagMs = performance.now() - t1;
    console.log(
      `Import: kl import ${formatMs(imported.ms)} ms wall (${mibPerS(state.text.length, imported.ms)}); ` +
        `read models complete ${formatMs(lagMs)} ms after it returned ` +
        `(${formatInt(visible.resources)} current_resources, ${formatInt(visible.edges)} live edges)`,
    );
    const sizes = await query(
      `SELECT octet_length(document) AS raw_state_bytes,
              pg_size_pretty(pg_total_relation_size('public.resources')) AS resources_table
         FROM raw_state WHERE name = '${STATE_NAME}'`,
    );
    const [rawBytes, resTable] = sizes.result.rows[0] as [number, string];
    console.log(`Stored: raw_state ${mib(rawBytes)}, resources ${resTable}`);
    console.log(`Stats:  ${await tableStats(bench.url)}`);
    console.log();

    // --- right after the import: the statistics PostgreSQL has then ----------------
    // Autovacuum analyzes a table at most once a naptime (1 min) after enough
    // changes; until then the planner sees tables it has never analyzed.
    console.log(
      `As imported (no ANALYZE yet): one run each, cancelled after ${AS_IMPORTED_TIMEOUT_MS / 1000} s; ` +
        'the plan PostgreSQL picks (EXPLAIN, estimates only):',
    );
    const asImported = new Map<DemoQuery['key'], string>();
    for (const q of QUERIES) {
      const plan = (await query(`EXPLAIN (FORMAT JSON) ${q.sql}`)).result;
      const r = await tryQuery(agent, kld.url, q.sql, 10_000, AS_IMPORTED_TIMEOUT_MS);
      const figure =
        r.error === undefined
          ? `${formatMs(r.ms)} ms round trip`
          : /QUERY\.TIMEOUT/.test(r.error)
            ? `CANCELLED after ${formatMs(r.ms)} ms (timeout_ms ${AS_IMPORTED_TIMEOUT_MS})`
            : `failed: ${r.error.slice(0, 200)}`;
      asImported.set(q.key, r.error === undefined ? formatMs(r.ms) : 'cancelled');
      console.log(`  ${q.label}: ${figure}`);
      if (r.error !== undefined || r.ms > q.targetMs * 5) {
        for (const line of renderPlan((plan.rows[0][0] as ExplainOutput[])[0].Plan, 2)) {
          console.log(line);
        }
      }
    }
    const analyzeMs = await analyze(bench.url);
    console.log(
      `ANALYZE resources, resource_edges, states: ${formatMs(analyzeMs)} ms ` +
        '(as the database owner; every figure below is after it)',
    );
    console.log(`Stats:  ${await tableStats(bench.url)}`);
    console.log();

    // --- the queries ------------------------------------------------------------
    const expected = bigStateExpected(SIZE);
    const expectedOf: Record<DemoQuery['key'], unknown> = {
      'by-type': expected.byType,
      'by-module': expected.byModule,
      'blast-radius': [expected.blastRadius],
    };
    const measured: Measured[] = [];
    for (const q of QUERIES) {
      const explainSql = `EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) ${q.sql}`;
      for (let i = 0; i < WARMUP; i++) {
        await query(q.sql);
        await query(explainSql);
      }
      const trips: number[] = [];
      const planning: number[] = [];
      const execution: number[] = [];
      let ours = '';
      for (let i = 0; i < REPS; i++) {
        const r = await query(q.sql);
        trips.push(r.ms);
        const answer = canonical(r.result.rows);
        if (i === 0) ours = answer;
        else if (answer !== ours) throw new Error(`${q.key}: answers differ between runs`);
        const e = explainTimes((await query(explainSql)).result);
        planning.push(e.planning);
        execution.push(e.execution);
      }
      let jqTimes: Distribution | null = null;
      let theirs: string | null = null;
      if (jq) {
        const samples: number[] = [];
        for (let i = 0; i <= JQ_REPS; i++) {
          const r = await runJq(q.jq, file);
          if (i === 0) theirs = canonical(JSON.parse(r.stdout));
          else samples.push(r.ms); // the first run warms the page cache
        }
        jqTimes = distribution(samples);
      }
      measured.push({
        query: q,
        roundTrip: distribution(trips),
        server: distribution(planning.map((p, i) => p + execution[i])),
        planning: distribution(planning),
        execution: distribution(execution),
        jq: jqTimes,
        ours,
        theirs,
        expected: canonical(expectedOf[q.key]),
      });
    }

    // --- the blast radius before resource_edges, interleaved with the new walk ---
    const blast = QUERIES.find((q) => q.key === 'blast-radius')!;
    if (!BLAST_RADIUS_OVER_INSTANCE_EDGES.includes('JOIN resource_dependencies')) {
      throw new Error('the blast radius over instance edges lost its join: see big-state-queries');
    }
    const walks = [
      {
        label: 'over resource_edges (now)',
        sql: blast.sql,
        ms: [] as number[],
        sqlMs: [] as number[],
      },
      {
        label: 'over resource_dependencies (before 023)',
        sql: BLAST_RADIUS_OVER_INSTANCE_EDGES,
        ms: [] as number[],
        sqlMs: [] as number[],
      },
    ];
    for (const w of walks) await query(w.sql);
    for (let i = 0; i < REPS; i++) {
      for (const w of i % 2 === 0 ? walks : [...walks].reverse()) {
        const r = await query(w.sql);
        w.ms.push(r.ms);
        if (canonical(r.result.rows) !== measured.find((m) => m.query === blast)!.ours) {
          throw new Error(`blast radius ${w.label}: a different answer`);
        }
        const e = explainTimes(
          (await query(`EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) ${w.sql}`)).result,
        );
        w.sqlMs.push(e.planning + e.execution);
      }
    }
    console.log('Blast radius, the same answer two ways, interleaved (ms, min / p50):');
    for (const w of walks) {
      console.log(
        `  ${w.label.padEnd(40)} round trip ${formatMs(Math.min(...w.ms))} / ${formatMs(distribution(w.ms).p50)}` +
          ` | SQL ${formatMs(Math.min(...w.sqlMs))} / ${formatMs(distribution(w.sqlMs).p50)}`,
      );
    }
    console.log();

    // --- answers ----------------------------------------------------------------
    console.log('Answers (ours = POST /v1/query; jq = jq over the state file):');
    for (const m of measured) {
      const same = m.theirs === null ? 'jq unavailable' : m.ours === m.theirs ? 'MATCH' : 'DIFFER';
      const truth = m.ours === m.expected ? 'as the topology says' : `EXPECTED ${m.expected}`;
      console.log(`  ${m.query.label}: ours ${display(m.ours)} — jq ${same} — ${truth}`);
      if (m.theirs !== null && m.ours !== m.theirs) console.log(`    jq: ${display(m.theirs)}`);
    }
    if (jq) {
      const ourSet = (await query(BLAST_RADIUS_SET.sql, 100_000)).result.rows.map((r) => r[0]);
      const jqSet = JSON.parse((await runJq(BLAST_RADIUS_SET.jq, file)).stdout) as unknown[];
      const a = JSON.stringify([...ourSet].map(String).sort());
      const b = JSON.stringify([...jqSet].map(String).sort());
      console.log(
        `  blast radius as address sets: ours ${formatInt(ourSet.length)}, jq ${formatInt(jqSet.length)} ` +
          `— ${a === b ? 'MATCH' : 'DIFFER'}`,
      );
    } else {
      console.log('  jq not found on PATH: the peer is unavailable, no comparison');
    }
    console.log();

    // --- figures ----------------------------------------------------------------
    console.log(
      `Timings, ms (${REPS} runs each after ${WARMUP} warm-up; jq ${JQ_REPS} runs after 1 warm-up):`,
    );
    for (const m of measured) {
      console.log(
        `  ${m.query.label.padEnd(34)} round trip p50 ${formatMs(m.roundTrip.p50)} p90 ` +
          `${formatMs(m.roundTrip.p90)} | SQL p50 ${formatMs(m.server.p50)} p90 ${formatMs(m.server.p90)} ` +
          `(plan ${formatMs(m.planning.p50)} + exec ${formatMs(m.execution.p50)}) | jq p50 ` +
          `${m.jq ? formatMs(m.jq.p50) : '-'} p90 ${m.jq ? formatMs(m.jq.p90) : '-'}`,
      );
    }
    console.log();

    // --- plans ------------------------------------------------------------------
    console.log('Plans (EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON), one run with per-node timing):');
    for (const q of QUERIES) {
      const plan = (await query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${q.sql}`)).result;
      const top = (plan.rows[0][0] as ExplainOutput[])[0];
      console.log(
        `  ${q.label}: planning ${formatMs(top['Planning Time'])} ms, execution ` +
          `${formatMs(top['Execution Time'])} ms`,
      );
      for (const line of renderPlan(top.Plan, 2)) console.log(line);
    }
    console.log();

    // --- the table ----------------------------------------------------------------
    const rows = measured.map((m) => {
      const ratio = m.jq ? m.jq.p50 / m.roundTrip.p50 : NaN;
      const serverOk = m.server.p50 <= m.query.targetMs;
      const ratioOk = Number.isFinite(ratio) && ratio >= TARGET_RATIO;
      const answers =
        m.theirs === null
          ? 'n/a'
          : m.ours === m.theirs && m.ours === m.expected
            ? 'same'
            : 'DIFFER';
      return [
        m.query.label,
        `${formatMs(m.server.p50)} / ${formatMs(m.server.p90)}`,
        `${formatMs(m.roundTrip.p50)} / ${formatMs(m.roundTrip.p90)}`,
        asImported.get(m.query.key) ?? '-',
        m.jq ? `${formatMs(m.jq.p50)} / ${formatMs(m.jq.p90)}` : 'unavailable',
        Number.isFinite(ratio) ? `${ratio.toFixed(1)}×` : '-',
        answers,
        `≤ ${m.query.targetMs} ms, ≥ ${TARGET_RATIO}×`,
        m.jq ? verdict(serverOk && ratioOk) : `${verdict(serverOk)} (server only)`,
        `${verdict(serverOk)} / ${m.jq ? verdict(ratioOk) : '-'}`,
      ];
    });
    printTable(
      [
        'query',
        'ours SQL ms p50/p90',
        'ours round trip p50/p90',
        'before ANALYZE',
        'jq ms p50/p90',
        'jq ÷ round trip',
        'answers',
        'target',
        'result',
        'server / ratio',
      ],
      rows,
    );
    console.log();
    console.log(
      '  ours SQL = planning + execution time from EXPLAIN ANALYZE (TIMING OFF) via POST /v1/query, ' +
        'as kl_reader;',
    );
    console.log(
      '  round trip = POST /v1/query from this process (keep-alive), response read; ' +
        'ratio = jq p50 ÷ round trip p50; targets judged on p50, after ANALYZE.',
    );
    console.log(
      '  before ANALYZE = one round trip right after the import, before the tables had statistics.',
    );
    const load = os.loadavg();
    console.log(
      `  load after: ${load.map((l) => l.toFixed(2)).join(' ')} (1/5/15 min); ` +
        `total ${((Date.now() - started) / 1000).toFixed(0)} s`,
    );
  } finally {
    await cleanup();
  }
}

function onSignal(signal: NodeJS.Signals): void {
  process.stderr.write(`\n${signal}: cleaning up\n`);
  void cleanup().finally(() => process.exit(130));
}

// --- POST /v1/query -------------------------------------------------------------

async function postQuery(
  agent: http.Agent,
  baseUrl: string,
  sql: string,
  maxRows: number,
  timeoutMs = QUERY_TIMEOUT_MS,
): Promise<{ ms: number; result: QueryResult }> {
  const r = await tryQuery(agent, baseUrl, sql, maxRows, timeoutMs);
  if (r.error !== undefined) throw new Error(`POST /v1/query: ${r.error}\n${sql}`);
  return { ms: r.ms, result: r.result! };
}

/** `POST /v1/query`; a refusal (a timeout, say) comes back as `error` instead of throwing. */
async function tryQuery(
  agent: http.Agent,
  baseUrl: string,
  sql: string,
  maxRows: number,
  timeoutMs: number,
): Promise<{ ms: number; result?: QueryResult; error?: string }> {
  const body = Buffer.from(JSON.stringify({ sql, max_rows: maxRows, timeout_ms: timeoutMs }));
  const r = await send(agent, 'POST', `${baseUrl}/v1/query`, body);
  if (r.status !== 200) return { ms: r.ms, error: `${r.status} ${r.body}` };
  const result = JSON.parse(r.body) as QueryResult;
  if (result.truncated) return { ms: r.ms, error: `truncated at ${maxRows} rows` };
  return { ms: r.ms, result };
}

/** Projections run after the commit: wait until every instance and edge is queryable. */
async function waitForReadModels(
  query: (sql: string) => Promise<{ result: QueryResult }>,
  instances: number,
  edges: number,
): Promise<{ resources: number; edges: number }> {
  const deadline = Date.now() + 300_000;
  for (;;) {
    const r = await query(
      `SELECT (SELECT count(*)::int FROM current_resources WHERE state_name = '${STATE_NAME}'),
              (SELECT count(*)::int FROM resource_dependencies d JOIN states s USING (state_id)
                WHERE s.name = '${STATE_NAME}' AND s.deleted_at IS NULL AND d.delete_version IS NULL),
              (SELECT coalesce(sum(e.instances), 0)::int FROM resource_edges e JOIN states s USING (state_id)
                WHERE s.name = '${STATE_NAME}' AND s.deleted_at IS NULL)`,
    );
    const [resources, liveEdges, resourceEdges] = r.result.rows[0] as [number, number, number];
    if (resources === instances && liveEdges === edges && resourceEdges === edges) {
      return { resources, edges: liveEdges };
    }
    if (Date.now() > deadline) {
      throw new Error(
        `read models incomplete after 300 s: ${resources}/${instances} instances, ${liveEdges}/${edges} edges`,
      );
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

// --- EXPLAIN --------------------------------------------------------------------

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'CTE Name'?: string;
  Alias?: string;
  'Join Type'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Actual Total Time'?: number;
  'Plan Rows'?: number;
  'Shared Hit Blocks'?: number;
  'Shared Read Blocks'?: number;
  'Index Cond'?: string;
  'Hash Cond'?: string;
  'Join Filter'?: string;
  Filter?: string;
  'Rows Removed by Filter'?: number;
  'Heap Fetches'?: number;
  Plans?: PlanNode[];
}

interface ExplainOutput {
  Plan: PlanNode;
  'Planning Time': number;
  'Execution Time': number;
}

function explainTimes(result: QueryResult): { planning: number; execution: number } {
  const top = (result.rows[0][0] as ExplainOutput[])[0];
  return { planning: top['Planning Time'], execution: top['Execution Time'] };
}

/** A compact EXPLAIN tree: node, relation/index, estimated vs actual rows, loops, time, buffers. */
function renderPlan(node: PlanNode, depth: number): string[] {
  const what = [
    node['Join Type'] ? `${node['Join Type']} ` : '',
    node['Node Type'],
    node['Index Name'] ? ` using ${node['Index Name']}` : '',
    node['Relation Name'] ? ` on ${node['Relation Name']}` : '',
    node['CTE Name'] ? ` on ${node['CTE Name']}` : '',
    node.Alias && node.Alias !== node['Relation Name'] && node.Alias !== node['CTE Name']
      ? ` ${node.Alias}`
      : '',
  ].join('');
  const figures = [
    `est ${formatInt(node['Plan Rows'] ?? NaN)}`,
    node['Actual Rows'] === undefined ? '' : `rows ${formatInt(node['Actual Rows'])}`,
    node['Actual Loops'] === undefined ? '' : `loops ${formatInt(node['Actual Loops'])}`,
    node['Actual Total Time'] === undefined
      ? ''
      : `${formatMs(node['Actual Total Time'] * (node['Actual Loops'] ?? 1))} ms`,
    node['Shared Hit Blocks'] === undefined
      ? ''
      : `bufs ${formatInt(node['Shared Hit Blocks'] + (node['Shared Read Blocks'] ?? 0))}`,
    node['Rows Removed by Filter'] ? `filtered ${formatInt(node['Rows Removed by Filter'])}` : '',
    node['Heap Fetches'] !== undefined ? `heap fetches ${formatInt(node['Heap Fetches'])}` : '',
  ]
    .filter(Boolean)
    .join(', ');
  const cond = node['Index Cond'] ?? node['Hash Cond'] ?? node['Join Filter'] ?? node.Filter;
  const pad = '  '.repeat(depth);
  const lines = [`${pad}-> ${what} (${figures})`];
  if (cond) lines.push(`${pad}     ${cond.length > 150 ? `${cond.slice(0, 147)}...` : cond}`);
  for (const child of node.Plans ?? []) lines.push(...renderPlan(child, depth + 1));
  return lines;
}

// --- jq -------------------------------------------------------------------------

function jqVersion(): string | null {
  try {
    return execFileSync('jq', ['--version'], { encoding: 'utf8' }).trim();
  } catch {
    return null;
  }
}

async function runJq(filter: string, file: string): Promise<{ ms: number; stdout: string }> {
  const r = await timed('jq', ['-c', filter, file], {
    cwd: path.dirname(file),
    env: process.env,
    timeoutMs: 300_000,
  });
  if (r.code !== 0) throw new Error(`jq exited ${r.code}: ${r.stderr.slice(-2000)}`);
  return { ms: r.ms, stdout: r.stdout };
}

// --- report -----------------------------------------------------------------------

async function printHeader(bench: BenchDatabase, jq: string | null): Promise<void> {
  const { server_version: version } = await postgresSettings(bench.url);
  console.log('Kilolock query benchmark (examples/big-state demo queries)');
  printMachine();
  console.log(`  node:     ${process.version}`);
  console.log(`  postgres: ${version} (${bench.origin})`);
  console.log(`  jq:       ${jq ?? 'not found on PATH: the peer is unavailable'}`);
  console.log();
}

/** ANALYZE of the tables the queries read, on the bench's own (owner) connection; ms. */
async function analyze(databaseUrl: string): Promise<number> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const t0 = performance.now();
    await client.query('ANALYZE resources, resource_edges, states');
    return performance.now() - t0;
  } finally {
    await client.end();
  }
}

/** Row counts and when PostgreSQL last analyzed the tables the queries read. */
async function tableStats(databaseUrl: string): Promise<string> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{
      relname: string;
      n_live_tup: string;
      analyzed: string | null;
    }>(
      `SELECT relname, n_live_tup::text,
              COALESCE(to_char(GREATEST(last_analyze, last_autoanalyze), 'HH24:MI:SS'), 'never') AS analyzed
         FROM pg_stat_user_tables
        WHERE relname IN ('resources', 'resource_edges', 'states')
        ORDER BY relname`,
    );
    return rows
      .map((r) => `${r.relname} ~${formatInt(Number(r.n_live_tup))} rows, analyzed ${r.analyzed}`)
      .join('; ');
  } finally {
    await client.end();
  }
}

/** A `canonical` answer for people: `a 1, b 2`. */
function display(answer: string): string {
  const rows = JSON.parse(answer) as string[];
  return rows.map((r) => (JSON.parse(r) as unknown[]).join(' ')).join(', ');
}

function mib(bytes: number): string {
  return `${(bytes / 2 ** 20).toFixed(1)} MiB`;
}

function mibPerS(bytes: number, ms: number): string {
  return `${(bytes / 2 ** 20 / (ms / 1000)).toFixed(1)} MiB/s`;
}

function intEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer`);
  return n;
}

main().then(
  () => process.exit(0),
  async (err: unknown) => {
    process.stderr.write(
      `bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    await cleanup();
    process.exit(1);
  },
);
