import * as fs from 'node:fs';
import * as http from 'node:http';
import { Client } from 'pg';

/**
 * Preloaded into a kld process (`node -r …/sql-count-preload.js`) by
 * push-exchange-probe: records each statement kld sends (every
 * `Client.query`, i.e. one round trip, with when it was sent and answered)
 * and each HTTP request it receives with the number of the connection it
 * came on; on SIGUSR2 it writes what it recorded since the last signal to
 * `$KL_PROBE_SQL_OUT.<pid>` and starts again.
 */
let seen: string[] = [];
// Each statement's line ends with when it was sent and answered, in ms from
// the last request's arrival (`@ 1.20-1.85`; no end when the answer came
// after the lines were written).
let arrived = performance.now();
const since = () => (performance.now() - arrived).toFixed(2);
const query = Client.prototype.query as (...args: unknown[]) => unknown;
(Client.prototype as { query: unknown }).query = function (this: Client, ...args: unknown[]) {
  const q = args[0] as string | { text?: string; constructor: { name: string } };
  const text = typeof q === 'string' ? q : (q.text ?? q.constructor.name);
  const at = seen.push(`sql ${text.replace(/\s+/g, ' ').slice(0, 110)} @ ${since()}`) - 1;
  const lines = seen;
  const answered = () => {
    if (lines === seen) seen[at] += `-${since()}`;
  };
  const last = args.length - 1;
  if (typeof args[last] === 'function') {
    const callback = args[last] as (...a: unknown[]) => unknown;
    args[last] = (...a: unknown[]) => (answered(), callback(...a));
  }
  const result = query.apply(this, args);
  if (result instanceof Promise) result.then(answered, answered);
  return result;
};
const connections = new WeakMap<object, number>();
let connectionCount = 0;
const emit = http.Server.prototype.emit as (...args: unknown[]) => boolean;
(http.Server.prototype as { emit: unknown }).emit = function (
  this: http.Server,
  event: string,
  ...args: unknown[]
) {
  if (event === 'request') {
    const req = args[0] as http.IncomingMessage;
    let n = connections.get(req.socket);
    if (n === undefined) connections.set(req.socket, (n = ++connectionCount));
    arrived = performance.now();
    seen.push(`http ${req.method} ${req.url?.split('?')[0]} on connection ${n}`);
  }
  return emit.call(this, event, ...args);
};
process.on('SIGUSR2', () => {
  fs.writeFileSync(`${process.env.KL_PROBE_SQL_OUT}.${process.pid}`, seen.join('\n'));
  seen = [];
});
