import type { RefreshOutcome, RefreshRunStatus } from '../../domain/refresh';

export interface RefreshProgress {
  /** Instances that have an outcome so far, out of `total` managed instances. */
  done: number;
  total: number;
  /** The instance that just finished; absent on the first (0 of total) event. */
  address?: string;
  outcome?: RefreshOutcome;
}

export interface RefreshOptions {
  dryRun: boolean;
  failFast: boolean;
  /** Provider groups refreshed at once; default: the number of CPUs. */
  concurrency?: number;
  /**
   * Provider processes per provider configuration, each configured once and
   * reading from the group's one queue. Default: one per CPU less one (kl's
   * own), at most 4, and at most one per 250 instances (see `poolSize`).
   * 1 = terraform's one process.
   */
  pool?: number;
  /**
   * Reads in flight per provider process; default 10, terraform's own
   * -parallelism. Providers serve concurrent RPCs (terraform relies on it);
   * 1 reads a group strictly one instance after another.
   */
  parallelism?: number;
  actor: string;
  providerSearchPaths: readonly string[];
  onProgress?: (progress: RefreshProgress) => void;
}

export interface RefreshFailure {
  address: string;
  message: string;
}

export interface RefreshReport {
  runId: string;
  state: string;
  status: RefreshRunStatus;
  dryRun: boolean;
  /** Instances read through their provider (unchanged, normalized, drifted, gone or failed). */
  checked: number;
  /** Instances whose attributes differ from the stored ones (gone ones not included). */
  changed: number;
  /** Instances read back in another spelling only (null ↔ empty): stored, not drift. */
  normalized: number;
  gone: number;
  failed: number;
  /** Built-in instances (terraform_data) no provider reads; kept as they are. */
  skipped: number;
  /** Sorted, so two runs over the same drift print the same list. */
  drifted: string[];
  normalizedAddresses: string[];
  goneAddresses: string[];
  failures: RefreshFailure[];
  fromVersion: number;
  /**
   * The version the refresh committed; null for dry runs, failures,
   * cancellations and runs that read nothing (only built-ins, or no managed
   * resources).
   */
  toVersion: number | null;
  durationMs: number;
  /** Things that went wrong after the outcome was decided (e.g. the unlock failed). */
  warnings: string[];
}

/**
 * The report as JSON, member names in snake_case: what `kl refresh --format
 * json` prints and what `POST /v1/states/<name>/refresh` answers, alike.
 */
export function toWire(r: RefreshReport) {
  return {
    run_id: r.runId,
    state: r.state,
    status: r.status,
    dry_run: r.dryRun,
    from_version: r.fromVersion,
    to_version: r.toVersion,
    checked: r.checked,
    changed: r.changed,
    normalized: r.normalized,
    gone: r.gone,
    failed: r.failed,
    skipped: r.skipped,
    drifted: r.drifted,
    normalized_addresses: r.normalizedAddresses,
    gone_addresses: r.goneAddresses,
    failures: r.failures,
    duration_ms: r.durationMs,
    warnings: r.warnings,
  };
}
