import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import { PerformanceObserver } from 'node:perf_hooks';
import { processCpuMs } from './process-cpu';

/** A server to GET from: its URL and, for its CPU time, its process id. */
export interface GetTarget {
  url: string;
  pid: number;
}

export interface GetTurnsOptions {
  /** Servers of the same bytes: each turn GETs every one, in rotating order. */
  targets: GetTarget[];
  /** The bytes all must serve; every response is compared with them as it arrives. */
  expectedFile: string;
  /** Rounds, each reported on its own. */
  rounds: number;
  /** Turns per round. */
  turns: number;
  /** Turns before the first round, not counted (connections, JIT, the servers' first reads). */
  warmup: number;
}

/** One round, per target (in the order given): round trips, time to the head, server CPU. */
export interface GetRound {
  ms: number[][];
  /** Time to the response's head (its status line and headers). */
  headMs: number[][];
  /** Each server's CPU (user + system, 10 ms ticks) over the round, per GET. */
  serverCpuMs: number[];
  /** The client's CPU per GET and its garbage collection over the round (ms). */
  clientCpuMs: number;
  clientGcMs: number;
}

/**
 * The GET phase's client, in a process of its own with a small heap: the
 * bench's own process holds the generated state and the texts of hundreds of
 * versions, and there a GET of 23 MB cost 130-170 ms of client CPU, most of
 * it collections of that heap that landed inside some round trips and not
 * others (two identical static servers measured that way differed by up to
 * 1.35×). Each turn GETs every target, the order rotating (A B C, B C A, …),
 * so all see the same machine; every body is compared with the expected bytes
 * chunk by chunk as it arrives and then dropped, so the client's own work per
 * GET stays small and the same for all.
 */
export function measureGetTurns(options: GetTurnsOptions): Promise<GetRound[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [__filename, JSON.stringify(options)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`GET client exited ${code}`));
      try {
        resolve(JSON.parse(out) as GetRound[]);
      } catch (err) {
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  });
}

/** GET `url`: its round trip and time to the head, after checking every byte against `expected`. */
function getChecked(
  agent: http.Agent,
  url: string,
  expected: Buffer,
): Promise<{ ms: number; headMs: number }> {
  return new Promise((resolve, reject) => {
    const startedAt = performance.now();
    const req = http.get(url, { agent }, (res) => {
      const headMs = performance.now() - startedAt;
      let at = 0;
      let mismatch: string | null = res.statusCode === 200 ? null : `status ${res.statusCode}`;
      res.on('data', (chunk: Buffer) => {
        if (mismatch === null && !chunk.equals(expected.subarray(at, at + chunk.length))) {
          mismatch = `bytes differ within ${at}..${at + chunk.length}`;
        }
        at += chunk.length;
      });
      res.on('end', () => {
        const ms = performance.now() - startedAt;
        if (mismatch === null && at !== expected.length) {
          mismatch = `${at} bytes, expected ${expected.length}`;
        }
        if (mismatch !== null) reject(new Error(`GET ${url}: ${mismatch}`));
        else resolve({ ms, headMs });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

async function run(options: GetTurnsOptions): Promise<GetRound[]> {
  const expected = fs.readFileSync(options.expectedFile);
  const { targets } = options;
  // One kept-alive connection per server, as terraform's client keeps one.
  const agents = targets.map(() => new http.Agent({ keepAlive: true, maxSockets: 1 }));
  let gcMs = 0;
  const gc = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) gcMs += entry.duration;
  });
  gc.observe({ entryTypes: ['gc'] });
  const turn = async (i: number, round?: Pick<GetRound, 'ms' | 'headMs'>) => {
    for (let j = 0; j < targets.length; j++) {
      const t = (i + j) % targets.length;
      const got = await getChecked(agents[t], targets[t].url, expected);
      round?.ms[t].push(got.ms);
      round?.headMs[t].push(got.headMs);
    }
  };
  for (let i = 0; i < options.warmup; i++) await turn(i);
  const rounds: GetRound[] = [];
  for (let r = 0; r < options.rounds; r++) {
    const times = { ms: targets.map(() => []), headMs: targets.map(() => []) };
    const cpu0 = targets.map((t) => processCpuMs(t.pid));
    const client0 = process.cpuUsage();
    const gc0 = gcMs;
    for (let i = 0; i < options.turns; i++) await turn(i, times);
    const client = process.cpuUsage(client0);
    const n = options.turns;
    rounds.push({
      ...times,
      serverCpuMs: targets.map((t, i) => (processCpuMs(t.pid) - cpu0[i]) / n),
      clientCpuMs: (client.user + client.system) / 1000 / (targets.length * n),
      clientGcMs: gcMs - gc0,
    });
  }
  gc.disconnect();
  for (const agent of agents) agent.destroy();
  return rounds;
}

if (require.main === module) {
  run(JSON.parse(process.argv[2]) as GetTurnsOptions).then(
    (rounds) => process.stdout.write(JSON.stringify(rounds)),
    (err: unknown) => {
      process.stderr.write(`GET client: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
}
