import { randomUUID } from 'node:crypto';
import * as os from 'node:os';
import type { RefreshHost } from '../../application/refresh/refresh-host';

/**
 * This machine as a refresh sees it: the wall clock, random ids, its
 * environment and CPUs. kld passes the KL_PROVIDER_PATH of its config (which
 * may come from a config file rather than the environment).
 */
export function systemRefreshHost(providerPath: string | null = null): RefreshHost {
  return {
    clock: { now: () => new Date() },
    ids: { uuid: randomUUID },
    env: providerPath === null ? process.env : { ...process.env, KL_PROVIDER_PATH: providerPath },
    cpuCount: os.availableParallelism(),
  };
}
