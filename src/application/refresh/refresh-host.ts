import type { Clock, Ids } from '../ports/clock.port';

/**
 * What a refresh takes from the machine it runs on. `kl` and `kld` pass
 * their own (see systemRefreshHost); tests pass fixed ones, so a run's
 * timestamps, lock id, environment and default concurrency are theirs to set.
 */
export interface RefreshHost {
  /** Stamps the lock's `Created` and measures the run's duration. */
  clock: Clock;
  /** The lock's ID. */
  ids: Ids;
  /** Where `{"env": …}` config values are looked up. */
  env: Readonly<Record<string, string | undefined>>;
  /** Provider groups refreshed at once when the caller does not say. */
  cpuCount: number;
}
