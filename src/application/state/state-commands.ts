import type { CommitSource, LockInfo } from '../../domain/state';
import type { StateDocumentV4 } from '../../domain/terraform';
import type { Caller } from '../command-context';
import { CommandWith } from '../props-message';

export type { Caller };

export class LockStateCommand extends CommandWith<
  { name: string; lockInfo: LockInfo; caller: Caller },
  void
>() {}

/**
 * `lockId` null: a force unlock of whoever holds the lock (what `terraform
 * force-unlock` sends). `forced` with a lockId: a force unlock of exactly
 * that lock (`kl force-unlock` after the operator saw the holder).
 * Answers the lock ID released, null when there was none.
 */
export class UnlockStateCommand extends CommandWith<
  { name: string; lockId: string | null; forced?: boolean; caller: Caller },
  { released: string | null }
>() {}

export interface CommitStateProps {
  name: string;
  document: StateDocumentV4;
  /** Of the bytes as received. */
  checksum: string;
  /** How many bytes were received (for metrics). */
  bytes: number;
  lockId: string | null;
  source: CommitSource;
  caller: Caller;
  /** Refuse (STATE.VERSION_CONFLICT) unless the state is still at this version. */
  baseVersion?: number;
  /** Refuse another lineage or an older serial than the current version (an unforced import). */
  checkContinuity?: boolean;
}

/** Answers the version written; for a retried commit, the version it wrote then. */
export class CommitStateCommand extends CommandWith<
  CommitStateProps,
  { version: number | null }
>() {}

export class DeleteStateCommand extends CommandWith<{ name: string; caller: Caller }, void>() {}
