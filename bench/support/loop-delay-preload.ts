import * as fs from 'node:fs';
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';

/**
 * Preloaded into a kld process (`node -r …/loop-delay-preload.js`) by
 * bench/event-loop: watches kld's event loop and its garbage collector; on
 * SIGUSR2 it writes the longest loop delay and the longest GC pause seen
 * since the last signal (ms, `delay gc`) to `$KL_PROBE_LOOP_OUT.<pid>` and
 * starts again. The signal is handled on the loop itself, so the file
 * appears once the loop is free.
 */
const delay = monitorEventLoopDelay({ resolution: 1 });
delay.enable();
let gcMax = 0;
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) gcMax = Math.max(gcMax, entry.duration);
}).observe({ entryTypes: ['gc'] });
process.on('SIGUSR2', () => {
  fs.writeFileSync(
    `${process.env.KL_PROBE_LOOP_OUT}.${process.pid}`,
    `${delay.max / 1e6} ${gcMax}`,
  );
  delay.reset();
  gcMax = 0;
});
