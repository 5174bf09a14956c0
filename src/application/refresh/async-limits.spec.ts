import { getEventListeners } from 'node:events';
import { Halted, untilHalted } from './async-limits';

describe('untilHalted', () => {
  it('settles with the promise while the signal stays quiet', async () => {
    const signal = new AbortController().signal;
    await expect(untilHalted(Promise.resolve(7), signal)).resolves.toBe(7);
    await expect(untilHalted(Promise.reject(new Error('no')), signal)).rejects.toThrow('no');
  });

  it('halts every call still waiting when the signal aborts, and none that settled', async () => {
    const stop = new AbortController();
    const never = new Promise<number>(() => undefined);
    const waiting = Array.from({ length: 3 }, () => untilHalted(never, stop.signal));
    const settled = untilHalted(Promise.resolve(1), stop.signal);
    await expect(settled).resolves.toBe(1);
    stop.abort();
    for (const call of waiting) await expect(call).rejects.toBeInstanceOf(Halted);
    await expect(untilHalted(Promise.resolve(2), stop.signal)).rejects.toBeInstanceOf(Halted);
  });

  it('listens on the signal once, however many calls wait on it', async () => {
    // A read in flight per instance: thousands of listeners were one add and remove each.
    const stop = new AbortController();
    const reads = Array.from({ length: 100 }, (_, i) =>
      untilHalted(Promise.resolve(i), stop.signal),
    );
    expect(getEventListeners(stop.signal, 'abort')).toHaveLength(1);
    await Promise.all(reads);
    untilHalted(new Promise(() => undefined), stop.signal).catch(() => undefined);
    expect(getEventListeners(stop.signal, 'abort')).toHaveLength(1);
  });
});
