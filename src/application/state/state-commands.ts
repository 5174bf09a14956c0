import { Command } from '@nestjs/cqrs';
import type { CommitSource, LockInfo } from '../../domain/state';
import type { StateDocumentV4 } from '../../domain/terraform';

import type { Caller } from '../command-context';

export type { Caller };

export class LockStateCommand extends Command<void> {
  constructor(
    public readonly name: string,
    public readonly lockInfo: LockInfo,
    public readonly caller: Caller,
  ) {
    super();
  }
}

/**
 * `lockId` null: a force unlock of whoever holds the lock (what `terraform
 * force-unlock` sends). `forced` with a lockId: a force unlock of exactly
 * that lock (`kl force-unlock` after the operator saw the holder).
 * Answers the lock ID released, null when there was none.
 */
export class UnlockStateCommand extends Command<{ released: string | null }> {
  constructor(
    public readonly name: string,
    public readonly lockId: string | null,
    public readonly caller: Caller,
    public readonly forced: boolean = lockId === null,
  ) {
    super();
  }
}

export class CommitStateCommand extends Command<{ version: number | null }> {
  constructor(
    public readonly name: string,
    public readonly document: StateDocumentV4,
    public readonly checksum: string,
    public readonly lockId: string | null,
    public readonly source: CommitSource,
    public readonly caller: Caller,
    /** Refuse (STATE.VERSION_CONFLICT) unless the state is still at this version. */
    public readonly baseVersion?: number,
    /** Refuse another lineage or an older serial than the current version (an unforced import). */
    public readonly checkContinuity = false,
  ) {
    super();
  }
}

export class DeleteStateCommand extends Command<void> {
  constructor(
    public readonly name: string,
    public readonly caller: Caller,
  ) {
    super();
  }
}
