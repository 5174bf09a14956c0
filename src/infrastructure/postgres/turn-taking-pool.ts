import type { Pool } from 'pg';

/**
 * A pool whose statements take turns, first come first served, for one of
 * its `max` connections before asking the pool for one. node-postgres bounds
 * a caller's wait for a connection by the connect timeout, waiting behind
 * the pool's other callers included: on the bulk pool, where every reader
 * waits a page long behind the others, 256 subscribers catching up at once
 * after a restart waited past 10 s for events of 12 KiB and ended as in a
 * database outage (bench/bulk-catch-up.ts). Here the wait for a turn is
 * bounded only by the number of readers (which KL_TOTAL_* bounds), and the
 * connect timeout is left to bound the real connects, so an outage still
 * ends them. Only `pool.query` takes turns: the bulk readers run single
 * statements, never transactions. `waitingCount` counts those waiting for a
 * turn too, so the pool's metrics still show the queue. The queue is a few
 * lines here: none of our dependencies offers one (p-limit is only a
 * transitive one), and its count must feed the pool's own `waitingCount`.
 */
export function takingTurns<P extends Pool>(pool: P, turns: number): P {
  let running = 0;
  const waiting: (() => void)[] = [];
  const next = () => {
    running--;
    waiting.shift()?.();
  };
  const query = pool.query.bind(pool) as (...args: unknown[]) => Promise<unknown>;
  const gated = async (...args: unknown[]): Promise<unknown> => {
    if (running < turns && waiting.length === 0) running++;
    else await new Promise<void>((resolve) => waiting.push(() => (running++, resolve())));
    try {
      return await query(...args);
    } finally {
      next();
    }
  };
  pool.query = gated as P['query'];
  let proto: object | null = Object.getPrototypeOf(pool) as object | null;
  while (proto && !Object.getOwnPropertyDescriptor(proto, 'waitingCount')) {
    proto = Object.getPrototypeOf(proto) as object | null;
  }
  const inPool = proto ? Object.getOwnPropertyDescriptor(proto, 'waitingCount')?.get : undefined;
  Object.defineProperty(pool, 'waitingCount', {
    get: () => waiting.length + ((inPool?.call(pool) as number | undefined) ?? 0),
  });
  return pool;
}
