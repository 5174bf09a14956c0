/** Raised inside a group when the run halts (cancel or fail-fast); never reported as a resource failure. */
export class Halted extends Error {}

/** Settles with the promise, or rejects with Halted as soon as the signal aborts. */
export function untilHalted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    promise.catch(() => undefined);
    return Promise.reject(new Halted());
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(new Halted());
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
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
