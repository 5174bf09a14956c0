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

/** `lockId` null: a force unlock (what `terraform force-unlock` sends). */
export class UnlockStateCommand extends Command<void> {
  constructor(
    public readonly name: string,
    public readonly lockId: string | null,
    public readonly caller: Caller,
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
