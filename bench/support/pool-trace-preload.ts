import * as fs from 'node:fs';
import { constants, PerformanceObserver } from 'node:perf_hooks';
import { Client, Pool } from 'pg';

/**
 * Preloaded into a kld process (`node -r …/pool-trace-preload.js`) by
 * bench/caller-flood with KL_BENCH_WHY: records, in kld, each statement
 * (its pool, its connection, its first words, when it was sent and when
 * kld's loop got its answer), each wait for a pool's connection (how long,
 * and how many were queued before it), and kld's event loop falling behind
 * a 10 ms timer by more than 20 ms, and its garbage collections. On SIGUSR2 it writes what it recorded
 * since the last signal to `$KL_PROBE_POOL_OUT.<pid>`, one JSON object a
 * line, times in ms since the epoch, and starts again. Nothing of it is in
 * kld's own code: without the preload it costs nothing.
 */

export type TraceLine =
  /** A statement: pool, connection, text, sent, answered (null: not yet). */
  | { k: 'q'; p: string; c: number; t: string; s: number; a: number | null }
  /** A wait for a connection of pool `p`: asked, given, queued before it. */
  | { k: 'w'; p: string; s: number; a: number | null; n: number }
  /** The event loop: a 10 ms timer ran `d` ms late at `s`. */
  | { k: 'l'; s: number; d: number }
  /** A garbage collection of `d` ms from `s` (`major`: mark-compact). */
  | { k: 'g'; s: number; d: number; major: boolean };

let lines: TraceLine[] = [];
const now = () => performance.timeOrigin + performance.now();

/** The pool's role in kld, told apart by its size and name (event-store.module.ts, database.ts). */
function poolName(pool: Pool): string {
  const o = pool.options as { max?: number; application_name?: string };
  if (o.application_name === 'kilolock-query') return 'query';
  if (o.max === 20) return 'commands';
  if (o.max === 10) return 'events';
  if (o.max === 2) return 'bulk';
  return `max${o.max}`;
}

const owner = new WeakMap<object, { pool: string; id: number }>();
let clients = 0;

const connect = Pool.prototype.connect as (...args: unknown[]) => unknown;
(Pool.prototype as { connect: unknown }).connect = function (this: Pool, ...args: unknown[]) {
  const p = poolName(this);
  const line: TraceLine = { k: 'w', p, s: now(), a: null, n: this.waitingCount };
  lines.push(line);
  const given = (client: unknown) => {
    line.a = now();
    if (client && !owner.has(client)) owner.set(client, { pool: p, id: ++clients });
  };
  if (typeof args[0] === 'function') {
    const cb = args[0] as (err: unknown, client: unknown, done: unknown) => void;
    return connect.call(this, (err: unknown, client: unknown, done: unknown) => {
      given(client);
      cb(err, client, done);
    });
  }
  const result = connect.apply(this, args) as Promise<unknown>;
  return result.then((client) => (given(client), client));
};

const query = Client.prototype.query as (...args: unknown[]) => unknown;
(Client.prototype as { query: unknown }).query = function (this: Client, ...args: unknown[]) {
  const q = args[0] as string | { text?: string; name?: string } | undefined;
  const text = typeof q === 'string' ? q : (q?.text ?? q?.name ?? '?');
  const who = owner.get(this) ?? { pool: 'client', id: 0 };
  const line: TraceLine = {
    k: 'q',
    p: who.pool,
    c: who.id,
    t: text.replace(/\s+/g, ' ').slice(0, 100),
    s: now(),
    a: null,
  };
  lines.push(line);
  const answered = () => void (line.a = now());
  const last = args.length - 1;
  if (typeof args[last] === 'function') {
    const callback = args[last] as (...a: unknown[]) => unknown;
    args[last] = (...a: unknown[]) => (answered(), callback(...a));
  }
  const result = query.apply(this, args);
  if (result instanceof Promise) result.then(answered, answered);
  return result;
};

let expected = now() + 10;
setInterval(() => {
  const t = now();
  if (t - expected > 20) lines.push({ k: 'l', s: expected, d: t - expected });
  expected = t + 10;
}, 10).unref();

new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    const detail = (e as { detail?: { kind?: number } }).detail;
    lines.push({
      k: 'g',
      s: performance.timeOrigin + e.startTime,
      d: e.duration,
      major: detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR,
    });
  }
}).observe({ entryTypes: ['gc'] });

process.on('SIGUSR2', () => {
  fs.writeFileSync(
    `${process.env.KL_PROBE_POOL_OUT}.${process.pid}`,
    lines.map((l) => JSON.stringify(l)).join('\n'),
  );
  lines = [];
});
