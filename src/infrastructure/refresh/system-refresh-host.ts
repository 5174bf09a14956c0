import { randomUUID } from 'node:crypto';
import * as os from 'node:os';
import type { RefreshHost } from '../../application/refresh/refresh-host';

/** This machine as a refresh sees it: the wall clock, random ids, its environment and CPUs. */
export function systemRefreshHost(): RefreshHost {
  return {
    clock: { now: () => new Date() },
    ids: { uuid: randomUUID },
    env: process.env,
    cpuCount: os.availableParallelism(),
  };
}
