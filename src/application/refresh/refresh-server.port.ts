import { ProviderSchema } from '../../domain/cty/schema';
import type { RefreshResult, RefreshRunStatus } from '../../domain/refresh';
import type { LockInfo } from '../../domain/state';
import { JsonObject, StateDocumentV4 } from '../../domain/terraform';
import type { FinishedRun, StartedRun } from './refresh-commands';

export const REFRESH_SERVER = Symbol('RefreshServer');

/** A held lock is an answer, not a failure: the caller names the holder. */
export type LockOutcome = { acquired: true } | { acquired: false; holder: LockInfo };

export interface StartRefreshRun {
  state: string;
  dryRun: boolean;
  actor?: string;
  /** The lock the run holds, so the server can refuse a commit from a run that lost it. */
  lockId?: string;
}

export interface FinishRefreshRun {
  status: RefreshRunStatus;
  errorSummary?: string;
  /** Present only when the run commits: the refreshed document (serial + 1). */
  document?: StateDocumentV4;
  lockId?: string;
}

/**
 * Everything a refresh needs from the server. `kl` reaches it over REST;
 * `kld` implements it in-process for server-side refresh, so the same
 * orchestrator runs in both places. Refusals are `DomainError`s with the
 * domain's codes (`STATE.NOT_FOUND`, `REFRESH.STATE_CHANGED`, …).
 */
export interface RefreshServerPort {
  /** The current document as text, exactly as the Terraform backend GET returns it. */
  getState(name: string): Promise<string>;
  lock(name: string, info: LockInfo): Promise<LockOutcome>;
  unlock(name: string, info: LockInfo): Promise<void>;

  startRun(request: StartRefreshRun): Promise<StartedRun>;
  /** Called in batches while the run progresses; order across batches is not significant. */
  recordResults(runId: string, results: RefreshResult[]): Promise<void>;
  /** Raises `REFRESH.STATE_CHANGED` when committing and the state moved since `startRun`. */
  finishRun(runId: string, request: FinishRefreshRun): Promise<FinishedRun>;

  /**
   * The stored provider config (values may be `{"env": "NAME"}` references,
   * resolved by the caller), or null when none is stored. `alias` null is the
   * default provider configuration.
   */
  getProviderConfig(
    state: string,
    source: string,
    alias: string | null,
  ): Promise<JsonObject | null>;

  /** Persistent schema cache keyed by normalised source and exact version. */
  getProviderSchema(source: string, version: string): Promise<ProviderSchema | null>;
  putProviderSchema(source: string, version: string, schema: ProviderSchema): Promise<void>;
}
