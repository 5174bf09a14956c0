/** Raised inside a group when the run halts (cancel or fail-fast); never reported as a resource failure. */
export class Halted extends Error {}

/** Settles with the promise, or rejects with Halted as soon as the signal aborts. */
export function untilHalted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    promise.catch(() => undefined);
    return Promise.reject(new Halted());
  }
  return new Promise<T>((resolve, reject) => {
    const waiting = waitersOf(signal);
    const onAbort = (): void => reject(new Halted());
    waiting.add(onAbort);
    promise.then(
      (v) => {
        waiting.delete(onAbort);
        resolve(v);
      },
      (e: unknown) => {
        waiting.delete(onAbort);
        reject(e);
      },
    );
  });
}

/**
 * The calls waiting on each signal, told by one listener: a listener of its own
 * per read (an EventTarget add and remove each) cost the refresh about 0.1 s of
 * CPU per 5,000 reads (docs/performance-history.md, "Refresh (wave 25)").
 */
const waiters = new WeakMap<AbortSignal, Set<() => void>>();

function waitersOf(signal: AbortSignal): Set<() => void> {
  let waiting = waiters.get(signal);
  if (!waiting) {
    const set = new Set<() => void>();
    signal.addEventListener(
      'abort',
      () => {
        for (const onAbort of set) onAbort();
        set.clear();
      },
      { once: true },
    );
    waiters.set(signal, set);
    waiting = set;
  }
  return waiting;
}

/** Settles when the promise does or after `ms`, whichever is first; never rejects on the timeout. */
export function withTimeout(promise: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Runs `fn` over the items with at most `limit` in flight; `fn` reports its own failures. */
export async function forEachBounded<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) await fn(items[next++]);
  };
  const settled = await Promise.allSettled(
    Array.from({ length: Math.min(limit, items.length) }, worker),
  );
  const rejected = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (rejected) throw rejected.reason;
}

/** A positive integer setting, or 1 for anything else. */
export function atLeastOne(n: number): number {
  return Number.isInteger(n) && n > 0 ? n : 1;
}
