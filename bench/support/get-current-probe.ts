import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { generateBigState } from './big-state-generator';
import { STATE_NAME } from './big-state-queries';
import { sendBytes } from './http-send';
import { databaseBackendsCpuNs, processCpuNs } from './process-cpu';
import { runProbe } from './probe-harness';
import { startStaticServer } from './static-server';
import { distribution, formatMs } from './stats';

/**
 * Probe: `GET` of the current document, again and again, from kld builds and
 * from two static file servers of the same bytes (the peer, and a control
 * that shows the spread between identical servers), taking turns in rotating
 * order on one kept-alive connection each. Each round is REPS GETs per
 * server; every answer is checked for the document's length. Prints per
 * round each server's p50 and CPU per GET (ms, the scheduler's ns clock),
 * then over all rounds min / p50 / p90, the time to the response head, the
 * CPU per GET and, for kld, its PostgreSQL backends' CPU per GET (the third
 * process a GET wakes), and each p50 over the static server's; then, per round, each server's p50
 * and CPU over the first build's in the same round (median and quartiles). The client only counts the bytes,
 * so the figures are the servers' own (the ladder's client decodes them too).
 *
 *   node dist/bench/support/get-current-probe.js A=/path/a/dist/src/kld.js B=/path/b/…
 *   KL_PROBE_INSTANCES=1000 KL_PROBE_ROUNDS=6 KL_PROBE_REPS=400
 *   KL_PROBE_TOKEN=1   authentication on: every GET sends a token (a lookup per request)
 *   KL_PROBE_PAST=1    `GET …?version=1` of a past version instead (the document is POSTed
 *                      again as serial 2, so version 1 is rebuilt from lifecycles per request);
 *                      each kld answer is checked for the length of that build's first answer
 *   KL_PROBE_WARMUP=50 GETs per server before the rounds
 */

const INSTANCES = Number(process.env.KL_PROBE_INSTANCES ?? 1000);
const ROUNDS = Number(process.env.KL_PROBE_ROUNDS ?? 6);
const REPS = Number(process.env.KL_PROBE_REPS ?? 400);
const TOKEN = process.env.KL_PROBE_TOKEN === '1';
const PAST = process.env.KL_PROBE_PAST === '1';
/** GETs per server before the rounds (a 20k past version takes seconds each). */
const WARMUP = Number(process.env.KL_PROBE_WARMUP ?? 50);

interface Server {
  label: string;
  url: string;
  pid: number;
  agent: http.Agent;
  headers: http.OutgoingHttpHeaders;
  ms: number[];
  head: number[];
  cpuMs: number;
  /** Each round's p50 and CPU per GET (ms), for the paired ratios. */
  rounds: { p50: number; cpu: number }[];
  /** kld's database (its backends' CPU is counted), or null for a static server. */
  database: string | null;
  pgMs: number;
  /** The answer's length in bytes. */
  size: number;
}

/** One GET: its round trip and the time to the response head, the whole body counted. */
function get(s: Server): Promise<{ ms: number; head: number }> {
  const size = s.size;
  return new Promise((resolve, reject) => {
    const startedAt = performance.now();
    const req = http.request(s.url, { agent: s.agent, headers: s.headers }, (res) => {
      const head = performance.now() - startedAt;
      let bytes = 0;
      res.on('data', (c: Buffer) => (bytes += c.length));
      res.on('end', () => {
        const ms = performance.now() - startedAt;
        if (res.statusCode !== 200 || bytes !== size) {
          reject(new Error(`${s.label}: ${res.statusCode}, ${bytes} of ${size} bytes`));
        } else resolve({ ms, head });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** A token for `databaseUrl`, made by that build's own `kld token create`. */
function createToken(kld: string, databaseUrl: string): string {
  const out = execFileSync(
    process.execPath,
    [kld, 'token', 'create', '--name', 'probe', '--scope', 'write:*'],
    { env: { ...process.env, KL_DATABASE_URL: databaseUrl, KL_LOG_LEVEL: 'warn' } },
  );
  return out.toString().trim().split('\n').pop()!.trim();
}

void runProbe('get-current', async ({ tmp, klds, postmaster }) => {
  const big = generateBigState({ size: Math.max(1, Math.round((INSTANCES - 8) / 2)) });
  const file = path.join(tmp, 'state.tfstate');
  fs.writeFileSync(file, big.text);
  const size = Buffer.byteLength(big.text);
  console.log(
    `GET ${PAST ? 'of a past version' : 'current'}: ${big.instanceCount} instances, ` +
      `${size} bytes, ${ROUNDS} × ${REPS}`,
  );
  const servers: Server[] = [];
  const server = (
    label: string,
    url: string,
    pid: number,
    token?: string,
    database: string | null = null,
  ): Server => ({
    label,
    url,
    pid,
    database,
    pgMs: 0,
    size,
    agent: new http.Agent({ keepAlive: true, maxSockets: 1 }),
    headers: token ? { authorization: `Bearer ${token}` } : {},
    ms: [],
    head: [],
    cpuMs: 0,
    rounds: [],
  });
  for (const k of klds) {
    let token: string | undefined;
    if (TOKEN) {
      token = createToken(k.entry, k.databaseUrl);
      process.env.KL_AUTH = 'on';
      await k.restart();
    }
    const s = server(
      k.label,
      `${k.kld.url}/v1/states/${STATE_NAME}`,
      k.kld.pid,
      token,
      new URL(k.databaseUrl).pathname.slice(1),
    );
    const posted = await sendBytes(s.agent, 'POST', s.url, Buffer.from(big.text), {
      'content-type': 'application/json',
      'content-length': size,
      ...s.headers,
    });
    if (posted.status !== 200) throw new Error(`${k.label}: POST ${posted.status}`);
    if (PAST) {
      const next = Buffer.from(big.text.replace(/"serial": 1,/, '"serial": 2,'));
      const again = await sendBytes(s.agent, 'POST', s.url, next, {
        'content-type': 'application/json',
        'content-length': next.length,
        ...s.headers,
      });
      if (again.status !== 200) throw new Error(`${k.label}: second POST ${again.status}`);
      s.url += '?version=1';
      const first = await sendBytes(s.agent, 'GET', s.url, undefined, s.headers);
      if (first.status !== 200) throw new Error(`${k.label}: GET ?version=1 ${first.status}`);
      s.size = first.body.length;
    }
    servers.push(s);
  }
  for (const label of ['static', 'control']) {
    const st = await startStaticServer(file);
    servers.push(server(label, st.url, st.child.pid!));
  }
  try {
    for (const s of servers) for (let i = 0; i < WARMUP; i++) await get(s);
    for (let round = 0; round < ROUNDS; round++) {
      const line: string[] = [];
      for (let i = 0; i < servers.length; i++) {
        const s = servers[(i + round) % servers.length];
        const ms: number[] = [];
        const backends = () =>
          postmaster !== null && s.database !== null
            ? databaseBackendsCpuNs(postmaster, s.database)
            : new Map<number, number>();
        const pg0 = backends();
        const cpu0 = processCpuNs(s.pid);
        for (let n = 0; n < REPS; n++) {
          const r = await get(s);
          ms.push(r.ms);
          s.head.push(r.head);
        }
        const cpu = (processCpuNs(s.pid) - cpu0) / 1e6;
        for (const [pid, ns] of backends()) s.pgMs += (ns - (pg0.get(pid) ?? ns)) / 1e6;
        s.cpuMs += cpu;
        s.ms.push(...ms);
        s.rounds.push({ p50: distribution(ms).p50, cpu: cpu / REPS });
        line.push(`${s.label} ${formatMs(distribution(ms).p50)} (${formatMs(cpu / REPS)})`);
      }
      console.log(`round ${round + 1}, load ${os.loadavg()[0].toFixed(1)}: ${line.join(' | ')}`);
    }
    const staticP50 = distribution(servers.find((s) => s.label === 'static')!.ms).p50;
    for (const s of servers) {
      const d = distribution(s.ms);
      console.log(
        `${s.label.padEnd(8)} min ${formatMs(d.min)} p50 ${formatMs(d.p50)} p90 ${formatMs(d.p90)} ms, ` +
          `head p50 ${formatMs(distribution(s.head).p50)} ms, CPU ${formatMs(s.cpuMs / s.ms.length)} ms per GET` +
          (s.database === null ? ', ' : ` (PostgreSQL ${formatMs(s.pgMs / s.ms.length)}), `) +
          `p50 ${(d.p50 / staticP50).toFixed(2)}× static`,
      );
    }
    // Each round's figures over the first build's in the same round: the
    // machine's drift between rounds (other processes' load) cancels out,
    // so many short rounds (KL_PROBE_ROUNDS=200 KL_PROBE_REPS=50) resolve
    // a difference of a few percent that the totals above do not.
    const first = servers[0];
    const quartiles = (v: number[]) => {
      const q = [...v].sort((a, b) => a - b);
      const at = (f: number) => q[Math.min(q.length - 1, Math.floor(f * q.length))];
      return `${at(0.5).toFixed(3)} (${at(0.25).toFixed(2)}–${at(0.75).toFixed(2)})`;
    };
    for (const s of servers.slice(1)) {
      const ratio = (key: 'p50' | 'cpu') => s.rounds.map((r, i) => r[key] / first.rounds[i][key]);
      console.log(
        `${s.label.padEnd(8)} over ${first.label}, per round, median (quartiles): ` +
          `p50 ${quartiles(ratio('p50'))}, CPU ${quartiles(ratio('cpu'))}`,
      );
    }
  } finally {
    for (const s of servers) s.agent.destroy();
    for (const s of servers.slice(klds.length)) process.kill(s.pid, 'SIGTERM');
  }
});
