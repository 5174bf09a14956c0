import { constants, PerformanceObserver } from 'node:perf_hooks';
import * as v8 from 'node:v8';

/**
 * The most garbage a big kld heap may gather past its live objects before
 * V8's next full collection. V8 picks the growth itself, up to 4x the live
 * heap on a machine with more than 2 GB for it: cheap while the heap is
 * small (at 20,000 instances 70-100 MB live, at 100,000 about 240 MB between
 * delta commits), but a big state's first commit, GET or projection rebuild
 * allocates fast enough to get the most, and at 100,000 instances 350-420 MB
 * of live objects grew to 1.0-1.5 GB of heap, mostly garbage, before a full
 * collection (docs/performance-history.md, "kld's memory at 100,000 instances (wave
 * 9)"). Not a limit: the heap still grows as far as live objects need. Half
 * this headroom bounded the peak further but cost 20 % more CPU per delta
 * commit at 100,000 instances (a full collection every few commits).
 */
export const HEAP_HEADROOM_BYTES = 256 * 2 ** 20;

// Below this a heap of a few GB would collect all the time for little gain.
const MIN_PERCENT = 10;

const FLAG = '--heap-growing-percent';

/**
 * V8's `--heap-growing-percent` after a full collection kept `liveBytes`:
 * 0 (V8 decides) while the live heap is within `headroom`, else the growth
 * that lets it gather at most `headroom` of garbage.
 */
export function growingPercent(liveBytes: number, headroom = HEAP_HEADROOM_BYTES): number {
  if (liveBytes <= headroom) return 0;
  return Math.max(MIN_PERCENT, Math.floor((100 * headroom) / liveBytes));
}

/** Did the operator choose a growth factor (`node --heap-growing-percent=…` or NODE_OPTIONS)? */
export function growthChosen(execArgv: readonly string[], nodeOptions = ''): boolean {
  return [...execArgv, ...nodeOptions.split(/\s+/)].some((arg) =>
    arg.replace(/_/g, '-').startsWith(FLAG),
  );
}

/**
 * Keeps kld's heap within HEAP_HEADROOM_BYTES of its live objects: after each
 * full collection, sets the growth V8 uses for the next one from what this
 * one kept (`growingPercent`). Does nothing when the operator chose a factor.
 * Returns what stops it.
 */
export function boundHeapGrowth(
  execArgv: readonly string[] = process.execArgv,
  nodeOptions = process.env.NODE_OPTIONS ?? '',
): () => void {
  if (growthChosen(execArgv, nodeOptions)) return () => undefined;
  let current = 0;
  const observer = new PerformanceObserver((list) => {
    const major = list.getEntries().some((e) => {
      const detail = (e as unknown as { detail?: { kind?: number } }).detail;
      return detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR;
    });
    if (!major) return;
    const percent = growingPercent(v8.getHeapStatistics().used_heap_size);
    if (percent === current) return;
    current = percent;
    v8.setFlagsFromString(`${FLAG}=${percent}`);
  });
  observer.observe({ entryTypes: ['gc'] });
  return () => observer.disconnect();
}
