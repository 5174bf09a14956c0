import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { sendBytes } from './http-send';
import type { KldProcess } from './kld-process';
import { processCpuMs } from './process-cpu';
import { SyntheticState } from './state-generator';
import { formatMs } from './stats';
import { PushTarget, pushNextSerials } from './terraform-pushes';
import { lockInfoBody, runProbe } from './probe-harness';

/**
 * Probe: what the first GET after a commit costs against the GETs after it,
 * for one or more kld builds taking turns, each on its own database of one
 * embedded PostgreSQL. Every GET is checked to return exactly the bytes just
 * POSTed. Prints per build the round trip and kld's CPU (10 ms ticks) of the
 * first GET after each delta POST and of the next two, min / median / max.
 *
 *   node dist/bench/support/get-after-commit-probe.js A=/path/a/dist/src/kld.js B=/path/b/…
 *   KL_PROBE_INSTANCES=20000 KL_PROBE_ROUNDS=15 KL_PROBE_CHANGED=3
 */

const INSTANCES = Number(process.env.KL_PROBE_INSTANCES ?? 20_000);
const ROUNDS = Number(process.env.KL_PROBE_ROUNDS ?? 15);
const CHANGED = Number(process.env.KL_PROBE_CHANGED ?? 3);
const PUSHES = Number(process.env.KL_PROBE_PUSHES ?? 0);
// Restart kld after the first POST: round 0 then measures the paths of a process
// with nothing cached (the first GET reads every chunk, the POST's projector
// reads the document back), reported apart from the other rounds.
const RESTART = process.env.KL_PROBE_RESTART === '1';

/** The DEBUG log's lines about backend requests and state writing, with their times. */
function requestLines(log: string): string[] {
  if (!fs.existsSync(log)) return [];
  const lines = fs.readFileSync(log, 'utf8').split('\n');
  fs.rmSync(log);
  return lines
    .filter((l) => /http|GET|POST|LOCK|UNLOCK|pg|statemgr|state push/i.test(l))
    .map((l) => l.slice(0, 200));
}

/**
 * `terraform state push` of the next serial to each kld build and to the pg
 * backend, taking turns, PUSHES times; prints wall and kld CPU per push and,
 * for the last round, the DEBUG log's request lines.
 */
async function pushes(
  tmp: string,
  pgUrl: string,
  builds: { label: string; kld: KldProcess }[],
): Promise<void> {
  const logOf = (t: PushTarget) => path.join(tmp, `tf-${t.label}.log`);
  const times = await pushNextSerials({
    tmp,
    pgUrl,
    builds,
    instances: INSTANCES,
    pushes: PUSHES,
    log: logOf,
    around: (t, i) =>
      Promise.resolve(async () => {
        const lines = requestLines(logOf(t));
        if (i === PUSHES - 1) console.log(`${t.label}, last push:\n  ${lines.join('\n  ')}`);
      }),
  });
  console.log(`state push of the next serial, ${PUSHES} each, taking turns: min / median / max`);
  for (const [label, xs] of times) {
    console.log(
      `  ${label.padEnd(6)} wall ${summary(xs.map((x) => x.ms))} ms, kld CPU ${summary(xs.map((x) => x.cpu))} ms`,
    );
  }
}

interface Build {
  label: string;
  kld: KldProcess;
  url: string;
  state: SyntheticState;
  first: { ms: number; cpu: number }[];
  later: { ms: number; cpu: number }[];
  post: { ms: number; cpu: number }[];
  lock: { ms: number; cpu: number }[];
  unlock: { ms: number; cpu: number }[];
  /** The body of the last POST, which every GET until the next must return. */
  posted: Buffer;
}

async function timed(
  b: Build,
  agent: http.Agent,
  method: string,
  body?: Buffer,
  query = '',
): Promise<{ ms: number; cpu: number; body: Buffer }> {
  const before = processCpuMs(b.kld.pid);
  const r = await sendBytes(agent, method, b.url + query, body);
  if (r.status !== 200) throw new Error(`${b.label} ${method}: ${r.status} ${r.body.toString()}`);
  return { ms: r.ms, cpu: processCpuMs(b.kld.pid) - before, body: r.body };
}

function summary(xs: number[]): string {
  const s = [...xs].sort((a, b) => a - b);
  const med = s[Math.floor(s.length / 2)];
  return `${formatMs(s[0])} / ${formatMs(med)} / ${formatMs(s[s.length - 1])}`;
}

async function main(): Promise<void> {
  await runProbe('get-probe', async ({ tmp, pg, agent, klds }) => {
    const running: Build[] = [];
    for (const k of klds) {
      const state = new SyntheticState({ instances: INSTANCES });
      const b: Build = {
        label: k.label,
        kld: k.kld,
        url: `${k.kld.url}/v1/states/probe`,
        state,
        first: [],
        later: [],
        post: [],
        lock: [],
        unlock: [],
        posted: Buffer.from(state.text()),
      };
      await timed(b, agent, 'POST', b.posted);
      if (RESTART) {
        b.kld = await k.restart();
        b.url = `${b.kld.url}/v1/states/probe`;
      }
      running.push(b);
    }
    await measure(running, agent);
    if (PUSHES > 0) await pushes(tmp, pg.url, running);
  });
}

/** ROUNDS rounds of a push's exchanges with two more GETs, then the figures per build. */
async function measure(running: Build[], agent: http.Agent): Promise<void> {
  console.log(
    `${INSTANCES} instances, ${ROUNDS} rounds of ${CHANGED} changed, load ${os.loadavg()[0].toFixed(1)}`,
  );
  // Each round as terraform's `state push` of the next serial: LOCK, GET (the
  // first after the last round's commit), two more GETs (not terraform's), POST, UNLOCK.
  for (let round = 0; round < ROUNDS; round++) {
    for (const b of running) {
      for (let c = 0; c < CHANGED; c++) b.state.changeOne((round * CHANGED + c) * 7919 + 13);
      const id = `00000000-0000-4000-8000-${String(round).padStart(12, '0')}`;
      const info = lockInfoBody(id, 'probe');
      b.lock.push(await timed(b, agent, 'LOCK', info));
      const first = await timed(b, agent, 'GET');
      b.first.push(first);
      if (!first.body.equals(b.posted)) throw new Error(`${b.label}: first GET differs`);
      for (let g = 0; g < 2; g++) {
        const r = await timed(b, agent, 'GET');
        if (!r.body.equals(b.posted)) throw new Error(`${b.label}: GET ${g} differs`);
        b.later.push(r);
      }
      b.state.serial += 1;
      b.posted = Buffer.from(b.state.text());
      b.post.push(await timed(b, agent, 'POST', b.posted, `?ID=${id}`));
      b.unlock.push(await timed(b, agent, 'UNLOCK', info));
    }
  }
  for (const b of running) {
    const line = (label: string, xs: { ms: number; cpu: number }[]) =>
      console.log(
        `  ${label.padEnd(11)} wall ${summary(xs.map((x) => x.ms))} ms, kld CPU ${summary(xs.map((x) => x.cpu))} ms`,
      );
    if (RESTART) {
      const cold = (xs: { cpu: number }[]) => formatMs(xs.shift()!.cpu);
      console.log(
        `${b.label} after a restart: first GET kld CPU ${cold(b.first)} ms, POST ${cold(b.post)} ms`,
      );
      b.lock.shift();
      b.unlock.shift();
      b.later.splice(0, 2);
    }
    console.log(`${b.label}: min / median / max${RESTART ? ' (rounds after the first)' : ''}`);
    line('LOCK', b.lock);
    line('first GET', b.first);
    line('delta POST', b.post);
    line('UNLOCK', b.unlock);
    line('later GETs', b.later);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
