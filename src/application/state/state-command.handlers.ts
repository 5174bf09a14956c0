import { Inject } from '@nestjs/common';
import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { STATE_AGGREGATE, StateAggregateService } from './state-aggregate';
import {
  CommitStateCommand,
  DeleteStateCommand,
  LockStateCommand,
  UnlockStateCommand,
} from './state-commands';

@CommandHandler(LockStateCommand)
export class LockStateHandler implements ICommandHandler<LockStateCommand> {
  constructor(@Inject(STATE_AGGREGATE) private readonly states: StateAggregateService) {}

  async execute(c: LockStateCommand): Promise<void> {
    await this.states.execute(c.name, {
      type: 'LockState',
      data: { name: c.name, newStateId: this.states.newStateId(), lockInfo: c.lockInfo },
      metadata: this.states.context(c.caller),
    });
  }
}

@CommandHandler(UnlockStateCommand)
export class UnlockStateHandler implements ICommandHandler<UnlockStateCommand> {
  constructor(@Inject(STATE_AGGREGATE) private readonly states: StateAggregateService) {}

  async execute(c: UnlockStateCommand): Promise<{ released: string | null }> {
    const metadata = this.states.context(c.caller);
    const { events } = await this.states.execute(
      c.name,
      c.forced || c.lockId === null
        ? {
            type: 'ForceUnlockState',
            data: { name: c.name, ...(c.lockId !== null ? { lockId: c.lockId } : {}) },
            metadata,
          }
        : { type: 'UnlockState', data: { name: c.name, lockId: c.lockId }, metadata },
    );
    const released = events.find((e) => e.type === 'LockReleased');
    return { released: released?.type === 'LockReleased' ? released.data.lockId : null };
  }
}

@CommandHandler(CommitStateCommand)
export class CommitStateHandler implements ICommandHandler<CommitStateCommand> {
  constructor(@Inject(STATE_AGGREGATE) private readonly states: StateAggregateService) {}

  async execute(c: CommitStateCommand): Promise<{ version: number | null }> {
    const { state } = await this.states.execute(c.name, {
      type: 'CommitState',
      data: {
        name: c.name,
        newStateId: this.states.newStateId(),
        document: c.document,
        ...(c.lockId !== null ? { lockId: c.lockId } : {}),
        source: c.source,
        checksum: c.checksum,
        ...(c.baseVersion !== undefined ? { baseVersion: c.baseVersion } : {}),
        ...(c.checkContinuity ? { checkContinuity: true } : {}),
      },
      metadata: this.states.context(c.caller),
    });
    // A retried commit appends nothing: its version is the current one.
    return { version: state.status === 'active' && state.version > 0 ? state.version : null };
  }
}

@CommandHandler(DeleteStateCommand)
export class DeleteStateHandler implements ICommandHandler<DeleteStateCommand> {
  constructor(@Inject(STATE_AGGREGATE) private readonly states: StateAggregateService) {}

  async execute(c: DeleteStateCommand): Promise<void> {
    await this.states.execute(c.name, {
      type: 'DeleteState',
      data: { name: c.name },
      metadata: this.states.context(c.caller),
    });
  }
}

export const STATE_COMMAND_HANDLERS = [
  LockStateHandler,
  UnlockStateHandler,
  CommitStateHandler,
  DeleteStateHandler,
];
