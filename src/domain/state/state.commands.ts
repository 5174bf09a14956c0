import { CommandContext } from '../shared/event';
import { StateDocumentV4 } from '../terraform/state-document';
import { FlatInstance } from '../terraform/state-instances';
import { LockInfo } from './lock-info';

export type CommitSource = 'http' | 'import' | 'refresh' | 'apply' | 'state-engine' | 'rollback';

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
  { name: string; newStateId: string; lockInfo: LockInfo }
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
  }
>;

export type DeleteState = StateCommandOf<'DeleteState', { name: string }>;

export type StateCommand = LockState | UnlockState | ForceUnlockState | CommitState | DeleteState;
