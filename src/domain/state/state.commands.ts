import { ReservationMode } from '../reservations/address-glob';
import { CommandContext } from '../shared/event';
import { JsonObject } from '../terraform/json-value';
import { InstanceObjectV4, OutputV4, StateDocumentV4 } from '../terraform/state-document';
import { FlatInstance, ResourceDescriptor } from '../terraform/state-instances';
import { QuotaLimit } from '../quota/quota-limits';
import { LockInfo } from './lock-info';
import { CommitSource, ReleaseReason } from './state.events';

export type { CommitSource };

interface StateCommandOf<Type extends string, Data> {
  type: Type;
  data: Data;
  metadata: CommandContext;
}

/**
 * Lock and commit may bring a state into being, so they carry the id the new
 * state would get; it is ignored when the state already exists.
 */
export type LockState = StateCommandOf<
  'LockState',
  {
    name: string;
    newStateId: string;
    lockInfo: LockInfo;
    /** The quota governing the state: an apply lock is refused while it is over the hard limit. */
    quota?: QuotaLimit;
  }
>;

export type UnlockState = StateCommandOf<'UnlockState', { name: string; lockId: string }>;

/**
 * `terraform force-unlock` sends no body: whoever holds the lock loses it.
 * With `lockId` (an operator who confirmed one holder), only that lock is
 * released; another holder is refused with STATE.LOCK_MISMATCH.
 */
export type ForceUnlockState = StateCommandOf<
  'ForceUnlockState',
  { name: string; lockId?: string }
>;

export type CommitState = StateCommandOf<
  'CommitState',
  {
    name: string;
    newStateId: string;
    document: StateDocumentV4;
    /**
     * The document's instances with their canonical hashes, as
     * `flattenInstances(document)` gives them: computed by the caller, who
     * may answer unchanged instances from a memo.
     */
    instances: FlatInstance[];
    lockId?: string;
    source: CommitSource;
    /** Of the bytes as received; computed by the transport, opaque here. */
    checksum: string;
    /**
     * The version the document was derived from. A refresh reads the state,
     * talks to providers for minutes, then writes back: if anyone committed
     * meanwhile, writing would silently undo their change.
     */
    baseVersion?: number;
    /**
     * Refuse a document of another lineage, or with an older serial, than
     * the current version (what `terraform state push` checks unless
     * forced). Terraform's own POST is never checked: `state push -force`
     * must be able to replace a lineage.
     */
    checkContinuity?: boolean;
    /** The quota governing the state: a version over it is stored and the overrun recorded. */
    quota?: QuotaLimit;
  }
>;

export type DeleteState = StateCommandOf<'DeleteState', { name: string }>;

/**
 * An apply run asks for its reservations, all or nothing. `writeSet` and
 * `readSet` are the addresses its plan writes and reads (globs allowed):
 * if any changed after `baseVersion`, the plan is stale.
 */
export type AcquireReservations = StateCommandOf<
  'AcquireReservations',
  {
    name: string;
    runId: string;
    /** The use case's ids for the reservations, one per request, in order. */
    reservationIds: string[];
    requests: { glob: string; mode: ReservationMode }[];
    leaseSeconds: number;
    info: JsonObject;
    baseVersion: number;
    writeSet: string[];
    readSet: string[];
    /** The quota governing the state: a run that writes is refused while it is over the hard limit. */
    quota?: QuotaLimit;
  }
>;

/** The run's heartbeat. */
export type RenewReservations = StateCommandOf<
  'RenewReservations',
  { name: string; runId: string; leaseSeconds: number }
>;

export type ReleaseReservations = StateCommandOf<
  'ReleaseReservations',
  { name: string; runId: string; reason: ReleaseReason }
>;

/** One instance object to put into the state, with the resource fields it carries. */
export interface DeltaUpsert {
  address: string;
  resource: ResourceDescriptor;
  instance: InstanceObjectV4;
}

/**
 * A row-level change to the current version: these instances put or
 * removed, these outputs set or removed, everything else as it is now. One
 * new version (serial + 1, same lineage) whatever was committed since
 * `baseVersion`, unless a touched address changed after it (stale).
 *
 * The writer is an apply run (`runId`: every touched address must be under
 * its write reservations), or the holder of the terraform lock (`lockId`),
 * or nobody, when no one else holds anything the change touches.
 */
export type CommitDelta = StateCommandOf<
  'CommitDelta',
  {
    name: string;
    source: CommitSource;
    runId?: string;
    lockId?: string;
    baseVersion: number;
    /** Of the request as received; computed by the transport, opaque here. */
    checksum: string;
    /** The terraform that produced the change; the current version's when absent. */
    terraformVersion?: string;
    upserts: DeltaUpsert[];
    deletes: string[];
    outputs: { set: Record<string, OutputV4>; remove: string[] };
    /** Release the run's reservations in the same append. */
    release?: boolean;
    /** The quota governing the state: a version over it is stored and the overrun recorded. */
    quota?: QuotaLimit;
  }
>;

export type StateCommand =
  | LockState
  | UnlockState
  | ForceUnlockState
  | CommitState
  | DeleteState
  | AcquireReservations
  | RenewReservations
  | ReleaseReservations
  | CommitDelta;
