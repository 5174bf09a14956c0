import { ReservationMode } from '../reservations/address-glob';
import { DomainEvent } from '../shared/event';
import { JsonObject, JsonValue } from '../terraform/json-value';
import { OutputDelta } from '../terraform/diff-outputs';
import { InstanceObjectV4, OutputV4 } from '../terraform/state-document';
import { ResourceDescriptor } from '../terraform/state-instances';
import { LockInfo } from './lock-info';

/** What wrote a version; recorded on ApplyCommitted, taken by the commit commands. */
export type CommitSource = 'http' | 'import' | 'refresh' | 'apply' | 'state-engine' | 'rollback';

/** Event type names are part of the public log format: written literally, never derived. */
export const StateEventType = {
  StateCreated: 'StateCreated',
  LockAcquired: 'LockAcquired',
  LockReleased: 'LockReleased',
  ApplyCommitted: 'ApplyCommitted',
  LifecycleOpened: 'LifecycleOpened',
  LifecycleClosed: 'LifecycleClosed',
  StateDeleted: 'StateDeleted',
  ReservationAcquired: 'ReservationAcquired',
  ReservationRenewed: 'ReservationRenewed',
  ReservationReleased: 'ReservationReleased',
  ReservationExpired: 'ReservationExpired',
  QuotaExceeded: 'QuotaExceeded',
} as const;

export const STATE_EVENT_TYPES: readonly string[] = Object.values(StateEventType);

export type StateCreated = DomainEvent<'StateCreated', { stateId: string; name: string }>;

/**
 * `mode` read: a plan's lock, shared with other plans. `mode` and
 * `acquiredAt` are absent in events written before plans shared (every lock
 * was exclusive then).
 */
export type LockAcquired = DomainEvent<
  'LockAcquired',
  { stateId: string; lockId: string; info: LockInfo; mode?: ReservationMode; acquiredAt?: string }
>;

export type LockReleased = DomainEvent<
  'LockReleased',
  { stateId: string; lockId: string; forced: boolean }
>;

export type ApplyCommitted = DomainEvent<
  'ApplyCommitted',
  {
    stateId: string;
    /** Ours: 1, 2, 3… per stateId, one per accepted commit. */
    version: number;
    /** Terraform's, as sent; may repeat or go backwards. */
    serial: number;
    lineage: string;
    /** Present only when this version's lineage differs from the previous version's. */
    lineageChanged?: { from: string; to: string };
    source: CommitSource;
    /** The apply run that committed this version (source apply). */
    runId?: string;
    terraformVersion: string;
    outputs: Record<string, OutputV4>;
    /**
     * The outputs this version closed and opened (changed ones are both).
     * Absent in events written before the decider made this decision: a
     * reader of those compares the outputs with the previous version's.
     */
    outputChanges?: OutputDelta;
    checkResults: JsonValue;
    /** Unknown top-level members of the document. */
    extra: JsonObject;
    checksum: string;
    instanceCount: number;
    resourceCount: number;
  }
>;

export type LifecycleOpened = DomainEvent<
  'LifecycleOpened',
  {
    stateId: string;
    version: number;
    serial: number;
    address: string;
    hash: string;
    resource: ResourceDescriptor;
    instance: InstanceObjectV4;
  }
>;

export type LifecycleClosed = DomainEvent<
  'LifecycleClosed',
  { stateId: string; version: number; serial: number; address: string; hash: string }
>;

export type StateDeleted = DomainEvent<'StateDeleted', { stateId: string }>;

/**
 * One per glob an apply run reserved; a run's reservations share one lease
 * and one `info`, carried by the run's first reservation only (the others
 * omit it), so a run of N globs records its info once. Events written
 * before wave 19 each carry it (the same): a reader takes the run's info
 * from its first reservation, which both shapes have. (No new schema
 * version: an upcaster would re-serialise every old event's data on the
 * feed, for a shape readers need not tell apart.)
 */
export type ReservationAcquired = DomainEvent<
  'ReservationAcquired',
  {
    stateId: string;
    reservationId: string;
    runId: string;
    glob: string;
    mode: ReservationMode;
    holder: string;
    info?: JsonObject;
    acquiredAt: string;
    expiresAt: string;
  }
>;

/** The run's heartbeat: every reservation of the run now lasts until `expiresAt`. */
export type ReservationRenewed = DomainEvent<
  'ReservationRenewed',
  { stateId: string; runId: string; reservationIds: string[]; expiresAt: string }
>;

/**
 * Why a run's reservations ended: it committed, it finished without a
 * commit (failed, conflict), or it was aborted (by itself or an operator).
 */
export type ReleaseReason = 'committed' | 'failed' | 'conflict' | 'aborted';

export type ReservationReleased = DomainEvent<
  'ReservationReleased',
  { stateId: string; runId: string; reservationIds: string[]; reason: ReleaseReason }
>;

/**
 * A run whose lease ran out, reclaimed by the acquire (or write) that
 * needed its addresses: `reclaimedBy` names that run or terraform lock.
 */
export type ReservationExpired = DomainEvent<
  'ReservationExpired',
  {
    stateId: string;
    runId: string;
    reservationIds: string[];
    expiresAt: string;
    reclaimedBy: string;
  }
>;

/**
 * A commit left the state over a quota's limit. The commit is stored all
 * the same (it records infrastructure that exists); this records the
 * overrun, with the version that made it and the quota it was judged by.
 */
export type QuotaExceeded = DomainEvent<
  'QuotaExceeded',
  {
    stateId: string;
    name: string;
    version: number;
    glob: string;
    level: 'hard' | 'soft';
    /** The limit exceeded: the quota's hard or soft limit. */
    limit: number;
    /** Resources the version holds (managed, non-deposed instances). */
    count: number;
  }
>;

export type StateEvent =
  | StateCreated
  | LockAcquired
  | LockReleased
  | ApplyCommitted
  | LifecycleOpened
  | LifecycleClosed
  | StateDeleted
  | ReservationAcquired
  | ReservationRenewed
  | ReservationReleased
  | ReservationExpired
  | QuotaExceeded;

export function isStateEvent(event: DomainEvent): event is StateEvent {
  return STATE_EVENT_TYPES.includes(event.type);
}
