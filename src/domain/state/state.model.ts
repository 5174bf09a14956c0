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
  lock: LockInfo | null;
  /** Last committed version; 0 before the first commit. */
  version: number;
  serial: number | null;
  lineage: string | null;
  /** address → canonical hash of every current instance; size = instance count. */
  instances: Map<string, string>;
  /** name → hash of every current output (outputHashes). */
  outputs: Map<string, string>;
  /** The last commit, to tell a retried request from a new one; null before the first. */
  head: CommitHead | null;
}

export interface CommitHead {
  checksum: string;
  source: CommitSource;
  /** The lock held when it was committed. */
  lockId: string | null;
}

export interface DeletedState {
  status: 'deleted';
  stateId: string;
  name: string;
}

export function initialState(): StateAggregate {
  return { status: 'missing' };
}
