import * as fs from 'node:fs';
import * as http from 'node:http';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { Client } from 'pg';

/**
 * Preloaded into a kld process (`node -r …/commit-stages-preload.js`) by
 * force-push-probe: the stages of every request, as JSON lines, so a big
 * commit's POST can be split into its stages from outside kld (nothing in
 * kld's own code changes, so a build without the preload pays nothing):
 *
 * - `req`: a request's arrival, its body's end (the `end` of the request
 *   stream) and its answer (`finish`);
 * - `mark`: a CommitStateCommand handed to the command bus (the document
 *   parsed) and the state decider's `decide` start and end;
 * - `sql`: each statement kld sends (every `Client.query`, COPY included:
 *   its end is the stream's `finish`) with the connection's number and
 *   backend pid, its start and end, and the backend's CPU at both (10 ms
 *   ticks, /proc), for statements within 5 s of a big request's arrival or
 *   answer.
 *
 * Every line carries `t` (ms, performance.now()), `cpu` (kld's CPU, all
 * threads, µs: process.cpuUsage) and `main` (the main thread's CPU, ms in 10
 * ms ticks). On SIGUSR2 the lines since the last signal go to
 * `$KL_PROBE_STAGES_OUT.<pid>`. KL_PROBE_BIG_BYTES (default 1 MiB) is the
 * body size from which a request is big; 0 records every request's statements.
 */
const BIG = Number(process.env.KL_PROBE_BIG_BYTES ?? 1 << 20);
const AFTER_MS = 5_000;
let lines: string[] = [];
// Until when statements are recorded: a big request and 5 s past its answer.
let openUntil = -1;
let bigOpen = 0;

function mainThreadMs(): number {
  const text = fs.readFileSync('/proc/thread-self/stat', 'utf8');
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
}

function backendMs(pid: number | undefined): number {
  if (!pid) return NaN;
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * 10;
  } catch {
    return NaN;
  }
}

function now(): { t: number; cpu: number; main: number } {
  const u = process.cpuUsage();
  return { t: performance.now(), cpu: u.user + u.system, main: mainThreadMs() };
}

function record(line: object): void {
  lines.push(JSON.stringify(line));
}

const recording = () => bigOpen > 0 || performance.now() < openUntil;

const clientIds = new WeakMap<object, number>();
let clientCount = 0;
const query = Client.prototype.query as (...args: unknown[]) => unknown;
(Client.prototype as { query: unknown }).query = function (this: Client, ...args: unknown[]) {
  if (!recording()) return query.apply(this, args);
  const q = args[0] as string | { text?: string; constructor: { name: string } };
  const text = (typeof q === 'string' ? q : (q.text ?? q.constructor.name))
    .replace(/\s+/g, ' ')
    .slice(0, 160);
  let c = clientIds.get(this);
  if (c === undefined) clientIds.set(this, (c = ++clientCount));
  const pid = (this as unknown as { processID?: number }).processID;
  const start = { ...now(), pg: backendMs(pid) };
  let done = false;
  const answered = () => {
    if (done) return;
    done = true;
    record({ k: 'sql', c, pid, text, start, end: { ...now(), pg: backendMs(pid) } });
  };
  const last = args.length - 1;
  if (typeof args[last] === 'function') {
    const callback = args[last] as (...a: unknown[]) => unknown;
    args[last] = (...a: unknown[]) => (answered(), callback(...a));
  }
  const result = query.apply(this, args) as unknown;
  if (result instanceof Promise) result.then(answered, answered);
  else if (result && typeof (result as { once?: unknown }).once === 'function') {
    const stream = result as NodeJS.EventEmitter;
    for (const e of ['finish', 'end', 'error']) stream.once(e, answered);
  }
  return result;
};

let requestCount = 0;
const emit = http.Server.prototype.emit as (...args: unknown[]) => boolean;
(http.Server.prototype as { emit: unknown }).emit = function (
  this: http.Server,
  event: string,
  ...args: unknown[]
) {
  if (event === 'request') {
    const req = args[0] as http.IncomingMessage;
    const res = args[1] as http.ServerResponse;
    const n = ++requestCount;
    const size = Number(req.headers['content-length'] ?? 0);
    const big = size >= BIG;
    if (big) bigOpen++;
    const base = { k: 'req', n, method: req.method, url: req.url?.split('?')[0], size };
    record({ ...base, at: 'arrive', ...now() });
    req.once('end', () => record({ ...base, at: 'body', ...now() }));
    res.once('finish', () => {
      record({ ...base, at: 'answer', status: res.statusCode, ...now() });
      if (big) {
        bigOpen--;
        openUntil = Math.max(openUntil, performance.now() + AFTER_MS);
      }
    });
  }
  return emit.call(this, event, ...args);
};

// The command handed to the bus (the body parsed) and the decider's decide,
// from the build's own modules (this file runs before kld's entry point).
const entry = path.resolve(process.argv[1] ?? '');
const load = createRequire(entry);
try {
  const cqrs = load('@nestjs/cqrs') as {
    CommandBus: { prototype: { execute: (...a: unknown[]) => unknown } };
  };
  const execute = cqrs.CommandBus.prototype.execute;
  cqrs.CommandBus.prototype.execute = function (this: unknown, ...a: unknown[]) {
    const name = (a[0] as object | undefined)?.constructor?.name;
    if (recording()) record({ k: 'mark', at: `bus ${name}`, ...now() });
    return execute.apply(this, a);
  };
  const spec = load('./application/state/state-aggregate.js') as {
    STATE: { decider: { decide: (c: { type: string }, s: unknown) => unknown } };
  };
  const decider = spec.STATE.decider;
  spec.STATE.decider = {
    ...decider,
    decide(c: { type: string }, s: unknown) {
      const big = recording() && c.type === 'CommitState';
      if (big) record({ k: 'mark', at: 'decide start', ...now() });
      const out = decider.decide(c, s);
      if (big) record({ k: 'mark', at: 'decide end', ...now() });
      return out;
    },
  };
} catch (err) {
  process.stderr.write(`commit-stages-preload: no marks (${String(err)})\n`);
}

process.on('SIGUSR2', () => {
  fs.writeFileSync(`${process.env.KL_PROBE_STAGES_OUT}.${process.pid}`, lines.join('\n'));
  lines = [];
});
