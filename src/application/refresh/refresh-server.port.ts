import { ProviderSchema } from '../../domain/cty/schema';
import { JsonObject, StateDocumentV4 } from '../../domain/terraform';

export const REFRESH_SERVER = Symbol('RefreshServer');

/**
 * Terraform's LockInfo, member names as terraform writes them, so the same
 * object travels through the http backend's LOCK/UNLOCK unchanged.
 */
export interface LockInfo {
  ID: string;
  Operation: string;
  Info: string;
  Who: string;
  Version: string;
  Created: string;
  Path: string;
}

/** A held lock is an answer, not a failure: the caller names the holder. */
export type LockOutcome = { acquired: true } | { acquired: false; holder: LockInfo };

export type RefreshOutcome = 'unchanged' | 'normalized' | 'drifted' | 'gone' | 'failed' | 'skipped';
export type RefreshRunStatus = 'succeeded' | 'failed' | 'cancelled';

export interface StartRefreshRun {
  state: string;
  dryRun: boolean;
  actor?: string;
  /** The lock the run holds, so the server can refuse a commit from a run that lost it. */
  lockId?: string;
}

export interface StartedRefreshRun {
  runId: string;
  stateId: string;
  fromVersion: number;
  fromSerial: number;
}

export interface RefreshResourceResult {
  address: string;
  /** The instance's provider string as state stores it (`provider["…"].alias`). */
  provider: string;
  outcome: RefreshOutcome;
  beforeHash: string;
  /** null when the object is gone or the read failed. */
  afterHash: string | null;
  changedPaths: string[];
  error?: string;
}

export interface FinishRefreshRun {
  status: RefreshRunStatus;
  errorSummary?: string;
  /** Present only when the run commits: the refreshed document (serial + 1). */
  document?: StateDocumentV4;
  lockId?: string;
}

export interface FinishedRefreshRun {
  runId: string;
  status: RefreshRunStatus;
  /** The version the commit created; null when nothing was committed. */
  toVersion: number | null;
  checked: number;
  changed: number;
  failed: number;
}

/** Stable codes a port implementation raises (as `DomainError`s) for the orchestrator to match. */
export const REFRESH_STATE_CHANGED = 'REFRESH.STATE_CHANGED';
export const STATE_NOT_FOUND = 'STATE.NOT_FOUND';

/**
 * Everything a refresh needs from the server. `kl` reaches it over REST;
 * `kld` implements it in-process for server-side refresh, so the same
 * orchestrator runs in both places.
 */
export interface RefreshServerPort {
  /** The current document as text, exactly as the Terraform backend GET returns it. */
  getState(name: string): Promise<string>;
  lock(name: string, info: LockInfo): Promise<LockOutcome>;
  unlock(name: string, info: LockInfo): Promise<void>;

  startRun(request: StartRefreshRun): Promise<StartedRefreshRun>;
  /** Called in batches while the run progresses; order across batches is not significant. */
  recordResults(runId: string, results: RefreshResourceResult[]): Promise<void>;
  /** Raises `REFRESH.STATE_CHANGED` when committing and the state moved since `startRun`. */
  finishRun(runId: string, request: FinishRefreshRun): Promise<FinishedRefreshRun>;

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
