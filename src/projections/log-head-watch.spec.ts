import { setMaxListeners } from 'node:events';
import { LogPosition } from '../domain/shared/event';
import { LogHeadWatch } from './log-head-watch';

const at = (n: number): LogPosition => ({ transactionId: BigInt(n), globalPosition: BigInt(n) });

/** A log whose head a test moves, and an append signal it sends by hand. */
function fakeLog() {
  const log = {
    head: null as LogPosition | null,
    looks: 0,
    failing: false,
    signals: new Set<() => void>(),
  };
  const head = async (): Promise<LogPosition | null> => {
    log.looks++;
    if (log.failing) throw new Error('connection refused');
    return log.head;
  };
  const appended = (_ms: number, signal: AbortSignal): Promise<void> =>
    new Promise((resolve) => {
      if (signal.aborted) return resolve();
      const done = () => {
        log.signals.delete(done);
        resolve();
      };
      log.signals.add(done);
      signal.addEventListener('abort', done, { once: true });
    });
  const signal = () => [...log.signals].forEach((s) => s());
  return { log, watch: new LogHeadWatch(head, appended, 20), signal };
}

/** Whether `p` settles within `ms`. */
async function settles(p: Promise<unknown>, ms: number): Promise<boolean> {
  let settled = false;
  void p.then(() => (settled = true));
  await new Promise((r) => setTimeout(r, ms));
  return settled;
}

/** A stop signal for many waiting loops, as the runner's is. */
function stopper(): AbortController {
  const stop = new AbortController();
  setMaxListeners(20, stop.signal);
  return stop;
}

describe('LogHeadWatch', () => {
  it('lets a loop sleep while the log ends at its checkpoint, and wakes it once an event lies after it', async () => {
    const { log, watch } = fakeLog();
    log.head = at(5);
    const stop = stopper();
    const waiting = watch.wait(() => at(5), stop.signal);
    expect(await settles(waiting, 150)).toBe(false);
    expect(log.looks).toBeGreaterThan(0);
    log.head = at(6); // committed by another process, its signal lost
    expect(await settles(waiting, 150)).toBe(true);
  });

  it('makes one look per poll for every waiting loop, and none once no loop waits', async () => {
    const { log, watch } = fakeLog();
    log.head = at(9);
    const stop = stopper();
    const started = Date.now();
    const loops = Array.from({ length: 12 }, () => watch.wait(() => at(9), stop.signal));
    await new Promise((r) => setTimeout(r, 130));
    // One look per 20 ms poll for the twelve of them, not one per loop.
    expect(log.looks).toBeGreaterThan(0);
    expect(log.looks).toBeLessThanOrEqual(Math.ceil((Date.now() - started) / 20));
    stop.abort();
    await Promise.all(loops);
    const after = log.looks;
    await new Promise((r) => setTimeout(r, 100));
    expect(log.looks).toBe(after);
  });

  it('wakes only the loops behind the head', async () => {
    const { log, watch } = fakeLog();
    log.head = at(7);
    const stop = stopper();
    const behind = watch.wait(() => at(3), stop.signal);
    const current = watch.wait(() => at(7), stop.signal);
    const unstarted = watch.wait(() => undefined, stop.signal);
    expect(await settles(behind, 100)).toBe(true);
    expect(await settles(unstarted, 0)).toBe(true);
    expect(await settles(current, 0)).toBe(false);
    stop.abort();
    await current;
  });

  it('leaves an empty log alone', async () => {
    const { watch } = fakeLog();
    const stop = stopper();
    const waiting = watch.wait(() => undefined, stop.signal);
    expect(await settles(waiting, 100)).toBe(false);
    stop.abort();
    expect(await settles(waiting, 0)).toBe(true);
  });

  it('wakes every loop at an append signal, or when the head cannot be read', async () => {
    const { log, watch, signal } = fakeLog();
    log.head = at(2);
    const stop = stopper();
    const first = watch.wait(() => at(2), stop.signal);
    const second = watch.wait(() => at(2), stop.signal);
    signal();
    expect(await settles(Promise.all([first, second]), 0)).toBe(true);
    const third = watch.wait(() => at(2), stop.signal);
    log.failing = true;
    expect(await settles(third, 100)).toBe(true);
  });
});
