import { ReservationMode } from '../reservations/address-glob';
import { LayeredMap } from '../shared/layered-map';
import { JsonObject, JsonValue } from '../terraform/json-value';
import { OutputV4 } from '../terraform/state-document';
import { LockInfo } from './lock-info';
import { CommitSource } from './state.commands';

/**
 * What the State aggregate needs to decide, and nothing more: the documents
 * themselves live in the events and the read models.
 */
export type StateAggregate = MissingState | ActiveState | DeletedState;

export interface MissingState {
  status: 'missing';
}

export interface ActiveState {
  status: 'active';
  stateId: string;
  name: string;
  /**
   * Terraform's locks by lock ID, oldest first: one write lock, or any
   * number of plan locks (a shared read of everything).
   */
  locks: Map<string, HeldLock>;
  /** Reservations of apply runs by reservation id, oldest first. */
  reservations: Map<string, Reservation>;
  /**
   * runId → the info of each run holding reservations: one object per run,
   * which its reservations' `info` share (a run may hold thousands of globs).
   */
  runInfo: Map<string, JsonObject>;
  /** Last committed version; 0 before the first commit. */
  version: number;
  serial: number | null;
  lineage: string | null;
  /**
   * address → canonical hash of every current instance; size = instance count.
   * This and the other per-address maps are LayeredMaps: a commit copies only
   * what earlier commits changed, not 20,000 entries.
   */
  instances: LayeredMap<string, string>;
  /** name → hash of every current output (outputHashes). */
  outputs: Map<string, string>;
  /**
   * address → the version that last opened or closed it, removed addresses
   * included: a plan based on an older version is stale for that address.
   */
  changedIn: LayeredMap<string, number>;
  /** resource address → what its instances share; only resources with instances. */
  resources: LayeredMap<string, ResourceEntry>;
  /** The last version's document members other than its instances; null before the first. */
  meta: CommitMeta | null;
  /** The last commit, to tell a retried request from a new one; null before the first. */
  head: CommitHead | null;
}

/** A terraform lock: its LockInfo verbatim, and whether it is shared (a plan's). */
export interface HeldLock {
  info: LockInfo;
  mode: ReservationMode;
  /** Null for locks taken before this was recorded. */
  acquiredAt: string | null;
}

/** A lease on the addresses a glob covers, held by an apply run. */
export interface Reservation {
  id: string;
  runId: string;
  /** In its one spelling (formatAddressGlob). */
  glob: string;
  mode: ReservationMode;
  /** The actor who acquired it. */
  holder: string;
  /** The run's info: the same object for every reservation of the run (runInfo). */
  info: JsonObject;
  acquiredAt: string;
  expiresAt: string;
}

export interface ResourceEntry {
  /** The resource-level fields (provider, each, unknown members) as one string. */
  fields: string;
  instances: number;
}

export interface CommitMeta {
  terraformVersion: string;
  outputs: Record<string, OutputV4>;
  checkResults: JsonValue;
  extra: JsonObject;
}

export interface CommitHead {
  checksum: string;
  source: CommitSource;
  /** The lock held when it was committed (the only one held then). */
  lockId: string | null;
  /** The apply run that committed it. */
  runId?: string | null;
}

export interface DeletedState {
  status: 'deleted';
  stateId: string;
  name: string;
}

export function initialState(): StateAggregate {
  return { status: 'missing' };
}
