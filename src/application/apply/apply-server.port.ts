import { ApplyLane } from '../../domain/apply/apply-run.events';
import { InstanceUpsert } from '../../domain/apply/state-slice';
import { JsonObject, OutputV4, StateDocumentV4 } from '../../domain/terraform';

export const APPLY_SERVER = Symbol('ApplyServer');

/** The current document of a state and the version that served it. */
export interface Trunk {
  document: StateDocumentV4;
  version: number;
}

export interface AcquireRequest {
  /** `state-engine`: the trusted lane's run (its reservations are the coarse lock terraform sees). */
  lane: ApplyLane;
  runId: string;
  baseVersion: number;
  write: string[];
  read: string[];
  writeSet: string[];
  readSet: string[];
  leaseSeconds: number;
  info: JsonObject;
}

export interface Reservation {
  id: string;
  glob: string;
  mode: 'read' | 'write';
  expiresAt: string;
}

/** A reservation (or Terraform lock) standing in the way. */
export interface Holder {
  glob: string;
  mode: 'read' | 'write';
  actor: string;
  /** The holding run; '' for a Terraform lock. */
  runId: string;
  /** The Terraform lock's ID; '' for a run. */
  lockId: string;
  kind: 'apply' | 'terraform-lock' | 'terraform-plan';
  acquiredAt: string;
  /** null for a Terraform lock, which has no lease. */
  expiresAt: string | null;
  lockInfo?: JsonObject;
}

export type AcquireOutcome =
  | { status: 'acquired'; runId: string; reservations: Reservation[]; expiresAt: string }
  | { status: 'conflict'; holders: Holder[] }
  | { status: 'stale'; addresses: { address: string; changedInVersion: number }[] };

export interface CommitRequest {
  lane: ApplyLane;
  baseVersion: number;
  terraformVersion: string;
  upserts: InstanceUpsert[];
  deletes: string[];
  outputs: { set: Record<string, OutputV4>; remove: string[] };
  counters: { add: number; change: number; destroy: number };
}

export interface FinishRequest {
  status: 'failed' | 'aborted' | 'conflict';
  errorSummary?: string;
  /** Terraform's resulting state, kept so that nothing it did is lost. */
  outputState?: string;
}

/** What a client's configuration names, for the state-engine lane (docs/state-engine.md). */
export interface EngineCandidates {
  addresses: string[];
  modulePrefixes: string[];
}

/** The server's state-engine lane, as its metadata describes it; null when it has none. */
export interface EngineOffer {
  protocolVersion: number;
  operations: string[];
}

/** A scope expansion's answer (docs/state-engine.md, "Scope expansion"). */
export interface EngineScope {
  version: number;
  scope: { address: string; instances: string[] }[];
  closure: { address: string; direction: string; via: string; reason: string }[];
  unresolved: { candidate: string; kind: string; classification: string }[];
  reservations: { write: string[]; read: string[] };
  provablySafe: boolean;
  reasons: string[];
  /** The state's instance count, when the server says it beside the scope. */
  instanceCount?: number;
  /**
   * The slice of the same candidates at `version`, when asked for
   * (`withSlice`) and the server proved the scope safe.
   */
  slice?: EngineSlice;
}

/** A slice of the state, the version it was read at, and what it cost to move. */
export interface EngineSlice extends Trunk {
  bytes: number;
}

/** Codes the port raises (as DomainErrors) that the apply use case reacts to. */
export const RESERVATION_EXPIRED = 'RESERVATION.EXPIRED';
export const RESERVATION_NOT_HELD = 'RESERVATION.NOT_HELD';
export const APPLY_STALE = 'APPLY.STALE';

/**
 * Everything `kl apply` needs from kld (docs/api.md, "apply runs"). A
 * conflict or a stale plan is an answer of `acquire`, not a failure.
 */
export interface ApplyServerPort {
  /** Raises STATE.NOT_FOUND when the state has no document. */
  trunk(state: string): Promise<Trunk>;
  /** `GET /v1/engine`: null when the server has no state-engine lane. */
  engineOffer(): Promise<EngineOffer | null>;
  /** The state's instance count as the state-engine lane reports it. */
  engineInstanceCount(state: string): Promise<number>;
  /**
   * `withSlice`: the slice in the same answer when the scope is provably safe
   * (a server whose offer lists `scope-slice`).
   */
  expandScope(
    state: string,
    candidates: EngineCandidates,
    options?: { withSlice?: boolean },
  ): Promise<EngineScope>;
  /** Raises STATE.NOT_FOUND when the state has no document. */
  slice(state: string, candidates: EngineCandidates): Promise<EngineSlice>;
  acquire(state: string, request: AcquireRequest): Promise<AcquireOutcome>;
  /** Raises RESERVATION.EXPIRED when the run's reservations were reclaimed. */
  heartbeat(state: string, runId: string, leaseSeconds: number): Promise<{ expiresAt: string }>;
  commit(
    state: string,
    runId: string,
    request: CommitRequest,
  ): Promise<{ version: number; serial: number }>;
  finish(state: string, runId: string, request: FinishRequest): Promise<void>;
}
