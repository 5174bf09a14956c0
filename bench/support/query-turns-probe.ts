import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { generateBigState } from './big-state-generator';
import { QUERIES, STATE_NAME } from './big-state-queries';
import { sendBytes } from './http-send';
import { databaseBackendsCpuNs, processCpuNs } from './process-cpu';
import { runProbe } from './probe-harness';
import { distribution, formatMs } from './stats';

/**
 * Probe: the seed queries (bench/support/big-state-queries.ts) as the ladder
 * sends them (`POST /v1/query`, max_rows 100,000, one kept-alive
 * connection), on the big-state example, from kld builds taking turns in
 * rotating order. Each round is REPS requests of each query per build; every
 * answer is checked against the first build's. Prints per round each build's
 * p50 per query, then over all rounds: min / p50 / p90, the median and range
 * of the rounds' p50s, kld's CPU and its PostgreSQL backends' CPU per query
 * (the scheduler's ns clock), and each build's p50 over the first build's in
 * the same round (median and range). With KL_PROBE_EXPLAIN=1, the plan of
 * each query as kl_reader sees it (EXPLAIN (ANALYZE, BUFFERS) through the
 * same endpoint, so with the same wrapping and settings) from each build.
 *
 *   node dist/bench/support/query-turns-probe.js base=/path/a/dist/src/kld.js branch=/path/b/…
 *   KL_PROBE_INSTANCES=20000 KL_PROBE_ROUNDS=8 KL_PROBE_REPS=15 KL_PROBE_EXPLAIN=1
 */

const INSTANCES = Number(process.env.KL_PROBE_INSTANCES ?? 20_000);
const ROUNDS = Number(process.env.KL_PROBE_ROUNDS ?? 8);
const REPS = Number(process.env.KL_PROBE_REPS ?? 15);
const EXPLAIN = process.env.KL_PROBE_EXPLAIN === '1';
/** Seconds to wait after the import, the databases' URLs printed (to look at them by hand). */
const HOLD_S = Number(process.env.KL_PROBE_HOLD_S ?? 0);

interface Build {
  label: string;
  url: string;
  pid: number;
  database: string;
  /** Per query key: every round trip (ms), each round's p50, kld's and PostgreSQL's CPU (ms). */
  per: Map<string, { ms: number[]; rounds: number[]; cpu: number; pg: number }>;
}

void runProbe('query-turns', async ({ tmp, klds, postmaster, agent }) => {
  const big = generateBigState({ size: Math.max(1, Math.round((INSTANCES - 8) / 2)) });
  fs.writeFileSync(path.join(tmp, 'state.tfstate'), big.text);
  console.log(
    `queries in turns: ${big.instanceCount} instances, ${ROUNDS} rounds × ${REPS} per query per build`,
  );
  const post = async (b: { url: string }, sql: string) => {
    const body = Buffer.from(JSON.stringify({ sql, max_rows: 100_000 }));
    const r = await sendBytes(agent, 'POST', `${b.url}/v1/query`, body);
    if (r.status !== 200) throw new Error(`${r.status} ${r.body.toString().slice(0, 300)}`);
    return { ms: r.ms, body: r.body.toString('utf8') };
  };
  const builds: Build[] = [];
  for (const k of klds) {
    const posted = await sendBytes(
      agent,
      'POST',
      `${k.kld.url}/v1/states/${STATE_NAME}`,
      Buffer.from(big.text),
    );
    if (posted.status !== 200) throw new Error(`${k.label}: POST ${posted.status}`);
    builds.push({
      label: k.label,
      url: k.kld.url,
      pid: k.kld.pid,
      database: new URL(k.databaseUrl).pathname.slice(1),
      per: new Map(QUERIES.map((q) => [q.key, { ms: [], rounds: [], cpu: 0, pg: 0 }])),
    });
  }
  const answers = new Map<string, string>();
  for (const b of builds) {
    for (const q of QUERIES) {
      for (let i = 0; i < 5; i++) {
        const rows = JSON.stringify(
          (JSON.parse((await post(b, q.sql)).body) as { rows: unknown }).rows,
        );
        if (!answers.has(q.key)) answers.set(q.key, rows);
        if (answers.get(q.key) !== rows) throw new Error(`${b.label} ${q.key}: another answer`);
      }
    }
  }
  if (HOLD_S > 0) {
    for (const k of klds)
      console.log(`${k.label}: ${k.databaseUrl} kld ${k.kld.url} pid ${k.kld.pid}`);
    await new Promise((r) => setTimeout(r, HOLD_S * 1000));
  }
  if (EXPLAIN) {
    for (const b of builds) {
      for (const q of QUERIES) {
        const plan = JSON.parse(
          (await post(b, `EXPLAIN (ANALYZE, BUFFERS, SETTINGS) ${q.sql}`)).body,
        ) as { rows: string[][] };
        console.log(`\n--- ${b.label} ${q.key}\n${plan.rows.map((r) => r[0]).join('\n')}`);
      }
    }
    console.log('');
  }
  for (let round = 0; round < ROUNDS; round++) {
    const line: string[] = [];
    for (let i = 0; i < builds.length; i++) {
      const b = builds[(i + round) % builds.length];
      const cells: string[] = [];
      for (const q of QUERIES) {
        const s = b.per.get(q.key)!;
        const ms: number[] = [];
        const backends = () =>
          postmaster !== null
            ? databaseBackendsCpuNs(postmaster, b.database)
            : new Map<number, number>();
        const pg0 = backends();
        const cpu0 = processCpuNs(b.pid);
        for (let n = 0; n < REPS; n++) ms.push((await post(b, q.sql)).ms);
        s.cpu += (processCpuNs(b.pid) - cpu0) / 1e6;
        for (const [pid, ns] of backends()) s.pg += (ns - (pg0.get(pid) ?? ns)) / 1e6;
        s.ms.push(...ms);
        s.rounds.push(distribution(ms).p50);
        cells.push(formatMs(distribution(ms).p50));
      }
      line.push(`${b.label} ${cells.join(' / ')}`);
    }
    console.log(`round ${round + 1}, load ${os.loadavg()[0].toFixed(1)}: ${line.join(' | ')}`);
  }
  const range = (v: number[]) => {
    const q = [...v].sort((a, b) => a - b);
    return `${formatMs(q[Math.floor((q.length - 1) / 2)])} (${formatMs(q[0])}–${formatMs(q[q.length - 1])})`;
  };
  for (const q of QUERIES) {
    console.log(`\n${q.label}:`);
    const first = builds[0].per.get(q.key)!;
    for (const b of builds) {
      const s = b.per.get(q.key)!;
      const d = distribution(s.ms);
      const ratio = s.rounds.map((p, i) => p / first.rounds[i]);
      console.log(
        `  ${b.label.padEnd(8)} min ${formatMs(d.min)} p50 ${formatMs(d.p50)} p90 ${formatMs(d.p90)} ms; ` +
          `rounds' p50 ${range(s.rounds)}; CPU per query kld ${formatMs(s.cpu / s.ms.length)} ` +
          `PostgreSQL ${formatMs(s.pg / s.ms.length)} ms` +
          (b === builds[0] ? '' : `; over ${builds[0].label} per round ${range(ratio)}`),
      );
    }
  }
});
