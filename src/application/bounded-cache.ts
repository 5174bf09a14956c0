import { LRUCache } from 'lru-cache';

/**
 * How much each in-process cache may hold. kld takes them from Config
 * (`KL_CACHE_*`, README); these are the defaults there and wherever a cache
 * is built without one (tests, benchmarks).
 */
export interface CacheBudgets {
  /** State and provider-config streams kept warm by each aggregate store. */
  streams: number;
  /** Refresh-run streams kept warm (a run's state holds every address it read). */
  refreshRuns: number;
  /** Instances whose canonical hash the command side remembers (InstanceHashMemo). */
  hashInstances: number;
  /** Instances of current documents the raw-state projector keeps taken apart. */
  documentInstances: number;
  /** Bytes of current documents kept ready to serve to terraform's GET. */
  servedBytes: number;
  /** Events of this process's recent appends its projectors take from memory (0: none). */
  heldEvents: number;
}

export const DEFAULT_CACHE_BUDGETS: Readonly<CacheBudgets> = {
  streams: 500,
  refreshRuns: 100,
  hashInstances: 100_000,
  documentInstances: 200_000,
  servedBytes: 256 * 2 ** 20,
  // a first commit of a 100,000-instance state fits
  heldEvents: 250_000,
};

/**
 * A least-recently-used cache of `budget` entries or, with `weigh`, of
 * entries weighing `budget` in all (bytes, instances: one 20,000-instance
 * state weighs as much as a thousand small ones). An entry heavier than the
 * whole budget is not kept, and setting one drops what its key held.
 * `evicted` hears of each key pushed out to make room (not of one deleted
 * or set again).
 */
export function boundedCache<V extends object>(
  budget: number,
  weigh?: (value: V) => number,
  evicted?: (key: string) => void,
): LRUCache<string, V> {
  const dispose = evicted && {
    dispose: (_value: V, key: string, reason: LRUCache.DisposeReason) => {
      if (reason === 'evict') evicted(key);
    },
  };
  return weigh
    ? // lru-cache takes only positive sizes: an empty document still takes a slot.
      new LRUCache<string, V>({
        maxSize: budget,
        sizeCalculation: (v) => Math.max(1, weigh(v)),
        ...dispose,
      })
    : new LRUCache<string, V>({ max: budget, ...dispose });
}
