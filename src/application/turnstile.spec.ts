import { setImmediate as nextTurn } from 'node:timers/promises';
import { Turnstile } from './turnstile';

describe('Turnstile', () => {
  it('lets `most` callers run at once, the others in the order they came', async () => {
    const gate = new Turnstile(2);
    let running = 0;
    let most = 0;
    const order: number[] = [];
    const releases: (() => void)[] = [];
    const calls = Array.from({ length: 5 }, (_, i) =>
      gate.through(async () => {
        running++;
        most = Math.max(most, running);
        order.push(i);
        await new Promise<void>((resolve) => releases.push(resolve));
        running--;
        return i;
      }),
    );
    for (let n = 0; n < 5; n++) {
      for (let i = 0; i < 10; i++) await nextTurn();
      releases.shift()?.();
    }
    expect(await Promise.all(calls)).toEqual([0, 1, 2, 3, 4]);
    expect(most).toBe(2);
    expect(order).toEqual([0, 1, 2, 3, 4]);
  });

  it('gives the turn back when a caller fails', async () => {
    const gate = new Turnstile(1);
    await expect(gate.through(() => Promise.reject(new Error('no')))).rejects.toThrow('no');
    await expect(gate.through(() => Promise.resolve('next'))).resolves.toBe('next');
  });
});
