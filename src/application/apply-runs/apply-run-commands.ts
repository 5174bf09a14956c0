import type { ApplyCounters, ApplyLane, ApplyStatus } from '../../domain/apply';
import type { ReservationMode } from '../../domain/reservations';
import type { DeltaUpsert } from '../../domain/state';
import type { JsonObject, JsonValue, OutputV4 } from '../../domain/terraform';
import type { Caller } from '../command-context';
import { CommandWith } from '../props-message';

export interface StartApplyRunRequest {
  /** The client's id for the run (a uuid), so a retried start is recognised; one is made if absent. */
  runId?: string;
  baseVersion: number;
  reservations: { glob: string; mode: ReservationMode }[];
  leaseSeconds: number;
  writeSet: string[];
  readSet: string[];
  info: JsonObject;
  lane: ApplyLane;
}

export interface GrantedReservation {
  id: string;
  glob: string;
  mode: ReservationMode;
  expiresAt: string;
}

export interface StartedApplyRun {
  runId: string;
  state: string;
  reservations: GrantedReservation[];
  expiresAt: string;
}

/** Acquires the run's reservations (all or nothing) and records the run. */
export class StartApplyRunCommand extends CommandWith<
  StartApplyRunRequest & { name: string; caller: Caller },
  StartedApplyRun
>() {}

/** The run's heartbeat. */
export class RenewApplyRunCommand extends CommandWith<
  { name: string; runId: string; leaseSeconds: number; caller: Caller },
  { expiresAt: string }
>() {}

export interface CommitApplyRunRequest {
  baseVersion: number;
  terraformVersion: string;
  upserts: DeltaUpsert[];
  deletes: string[];
  outputs: { set: Record<string, OutputV4>; remove: string[] };
  counters: ApplyCounters | null;
  /** Of the request body as received. */
  checksum: string;
}

/** Commits the run's row-level change as one version, releases it, ends it `committed`. */
export class CommitApplyRunCommand extends CommandWith<
  CommitApplyRunRequest & { name: string; runId: string; caller: Caller },
  { version: number; serial: number }
>() {}

/** Ends a run that did not commit; its reservations are released. */
export class FinishApplyRunCommand extends CommandWith<
  {
    name: string;
    runId: string;
    status: Exclude<ApplyStatus, 'committed'>;
    errorSummary: string | null;
    outputState: JsonValue | null;
    caller: Caller;
  },
  void
>() {}

/**
 * The operator's escape hatch for a dead run: its reservations are released
 * and it ends `aborted` (a run that already ended keeps its ending). With no
 * state name, the run's state is looked up.
 */
export class AbortApplyRunCommand extends CommandWith<
  {
    name: string | null;
    runId: string;
    caller: Caller;
    /**
     * Throws unless the caller may write the run's state. Called with the
     * state the run's own stream (or its reservations) name, before anything
     * is written: a read model that has not seen the run yet cannot vouch.
     */
    mayWrite?: (state: string) => void;
  },
  AbortedApplyRun
>() {}

export interface AbortedApplyRun {
  runId: string;
  state: string;
  /** How the run ended: `aborted` now, or what it had ended with before. */
  status: ApplyStatus | null;
  /** How many reservations this released. */
  released: number;
}
