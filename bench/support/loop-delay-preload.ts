import * as fs from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';

/**
 * Preloaded into a kld process (`node -r …/loop-delay-preload.js`) by
 * bench/event-loop: watches kld's event loop; on SIGUSR2 it writes the
 * longest delay seen since the last signal (ms) to
 * `$KL_PROBE_LOOP_OUT.<pid>` and starts again. The signal is handled on the
 * loop itself, so the file appears once the loop is free.
 */
const delay = monitorEventLoopDelay({ resolution: 1 });
delay.enable();
process.on('SIGUSR2', () => {
  fs.writeFileSync(`${process.env.KL_PROBE_LOOP_OUT}.${process.pid}`, String(delay.max / 1e6));
  delay.reset();
});
