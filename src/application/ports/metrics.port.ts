import type { DomainEvent } from '../../domain/shared/event';

export const COMMAND_METRICS = Symbol('CommandMetrics');

/**
 * How a command ended: `decided` appended events, `unchanged` appended none
 * (a retry, an unlock of an unlocked state), `refused` was a DomainError
 * (`code` says which), `lagging` is stored but its read models did not
 * follow in time, `failed` is anything else.
 */
export type CommandOutcome = 'decided' | 'unchanged' | 'refused' | 'lagging' | 'failed';

export interface CommandObservation {
  /** The aggregate's name (`state`, `refresh-run`, `provider-configs`). */
  aggregate: string;
  /** The command's type (`CommitState`, `LockState`…). */
  command: string;
  outcome: CommandOutcome;
  /** The refusal's code, for `refused` and `lagging`. */
  code?: string;
  /** From the command reaching the DeciderService to its read models including it. */
  seconds: number;
  /** Waiting behind earlier commands on the same stream in this process. */
  queueSeconds: number;
  /** Appends lost to a concurrent writer (another replica) and decided again. */
  conflicts: number;
  /** What it appended. */
  events: readonly DomainEvent[];
}

export interface CommitObservation {
  outcome: CommandOutcome;
  /** Receiving the document's instances, hashing, deciding, appending, read models. */
  seconds: number;
  /** The document's size as received. */
  bytes: number;
  /** Instances whose lifecycle this commit closed or opened (added, changed, removed). */
  instancesChanged: number;
}

export interface RefreshRunObservation {
  /** The status the run finished with (`succeeded`, `failed`, `cancelled`…). */
  status: string;
  /** From its start to its finish, as both commands' clocks say; null when unknown. */
  seconds: number | null;
}

/**
 * What the use cases report for operators (Prometheus at `/metrics`). Calls
 * never throw and never wait: a metric is never a reason for a command to
 * fail.
 */
export interface CommandMetrics {
  commandRan(o: CommandObservation): void;
  commitRan(o: CommitObservation): void;
  refreshRunFinished(o: RefreshRunObservation): void;
}

/** For compositions that export nothing (tests, maintenance commands). */
export const NO_METRICS: CommandMetrics = {
  commandRan: () => undefined,
  commitRan: () => undefined,
  refreshRunFinished: () => undefined,
};
