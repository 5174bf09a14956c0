import { Inject, Optional } from '@nestjs/common';
import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { DomainError } from '../../domain/shared/domain-error';
import { StateEvent, stateStreamId } from '../../domain/state';
import { FlatInstance, flattenInstances, InstanceObjectV4 } from '../../domain/terraform';
import { DeciderService } from '../decider.service';
import { COMMAND_METRICS, CommandMetrics, CommandOutcome } from '../ports/metrics.port';
import { SERVER_LAGGING } from '../ports/read-model-sync.port';
import { withQuota } from '../quota/quota-commands';
import { InstanceHashMemo } from './instance-hash-memo';
import { ServedInstanceBytes } from './served-instance-bytes';
import { STATE } from './state-aggregate';
import {
  CommitStateCommand,
  DeleteStateCommand,
  LockStateCommand,
  UnlockStateCommand,
} from './state-commands';

@CommandHandler(LockStateCommand)
export class LockStateHandler implements ICommandHandler<LockStateCommand> {
  constructor(private readonly deciders: DeciderService) {}

  async execute(c: LockStateCommand): Promise<void> {
    const newStateId = this.deciders.newId();
    const metadata = this.deciders.context(c.caller);
    await withQuota(this.deciders, c.name, (quota, readFrom) =>
      this.deciders.execute(
        STATE,
        {
          type: 'LockState',
          data: { name: c.name, newStateId, lockInfo: c.lockInfo, ...quota },
          metadata,
        },
        readFrom,
      ),
    );
  }
}

@CommandHandler(UnlockStateCommand)
export class UnlockStateHandler implements ICommandHandler<UnlockStateCommand> {
  constructor(private readonly deciders: DeciderService) {}

  async execute(c: UnlockStateCommand): Promise<{ released: string | null }> {
    const metadata = this.deciders.context(c.caller);
    const { events } = await this.deciders.execute(
      STATE,
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

/**
 * The decider takes the document's instances with their canonical hashes;
 * they are computed here, answering unchanged instances from the memo of
 * the state's last commit, so a one-instance change to a big state does not
 * re-hash all of it.
 */
@CommandHandler(CommitStateCommand)
export class CommitStateHandler implements ICommandHandler<CommitStateCommand> {
  constructor(
    private readonly deciders: DeciderService,
    private readonly hashes: InstanceHashMemo,
    @Inject(COMMAND_METRICS) private readonly metrics: CommandMetrics,
    @Optional() private readonly served?: ServedInstanceBytes,
  ) {}

  async execute(c: CommitStateCommand): Promise<{ version: number | null }> {
    const started = performance.now();
    let outcome: CommandOutcome = 'failed';
    let instancesChanged = 0;
    const memo = this.hashes.open(stateStreamId(c.name));
    let instances: FlatInstance[] = [];
    let warming: { stop(): void } | undefined;
    try {
      // The instances hashed here are the ones no earlier commit made (the
      // rest are known by identity): their served bytes are made while the
      // append waits for PostgreSQL (ServedInstanceBytes).
      const fresh: InstanceObjectV4[] = [];
      instances = flattenInstances(
        c.document,
        (address, resource, instance) => {
          fresh.push(instance);
          return memo.hash(address, resource, instance);
        },
        memo.known,
        memo.made,
      );
      warming = this.served?.warm(fresh);
      const newStateId = this.deciders.newId();
      const metadata = this.deciders.context(c.caller);
      const { state, events } = await withQuota(this.deciders, c.name, (quota, readFrom) =>
        this.deciders.execute(
          STATE,
          {
            type: 'CommitState',
            data: {
              name: c.name,
              newStateId,
              document: c.document,
              instances,
              ...(c.lockId !== null ? { lockId: c.lockId } : {}),
              source: c.source,
              checksum: c.checksum,
              ...(c.baseVersion !== undefined ? { baseVersion: c.baseVersion } : {}),
              ...(c.checkContinuity ? { checkContinuity: true } : {}),
              ...quota,
            },
            metadata,
          },
          readFrom,
        ),
      );
      outcome = events.length > 0 ? 'decided' : 'unchanged';
      instancesChanged = changedAddresses(events);
      // A retried commit appends nothing: its version is the current one.
      return { version: state.status === 'active' && state.version > 0 ? state.version : null };
    } catch (err) {
      if (err instanceof DomainError) {
        outcome = err.code === SERVER_LAGGING ? 'lagging' : 'refused';
      }
      throw err;
    } finally {
      // Answered: the projectors have what they needed; refused: nothing to serve.
      warming?.stop();
      memo.done(instances);
      this.metrics.commitRan({
        outcome,
        seconds: (performance.now() - started) / 1000,
        bytes: c.bytes,
        instancesChanged,
      });
    }
  }
}

/**
 * How many addresses a commit's events opened or closed. The decider opens
 * and closes an address at most once each: only a closed one can be counted
 * twice, so a first commit's 20,000 opens need no set of their addresses.
 */
function changedAddresses(events: readonly StateEvent[]): number {
  const closed = new Set<string>();
  for (const e of events) if (e.type === 'LifecycleClosed') closed.add(e.data.address);
  let count = closed.size;
  for (const e of events) {
    if (e.type === 'LifecycleOpened' && !closed.has(e.data.address)) count++;
  }
  return count;
}

@CommandHandler(DeleteStateCommand)
export class DeleteStateHandler implements ICommandHandler<DeleteStateCommand> {
  constructor(private readonly deciders: DeciderService) {}

  async execute(c: DeleteStateCommand): Promise<void> {
    await this.deciders.execute(STATE, {
      type: 'DeleteState',
      data: { name: c.name },
      metadata: this.deciders.context(c.caller),
    });
  }
}

export const STATE_COMMAND_HANDLERS = [
  LockStateHandler,
  UnlockStateHandler,
  CommitStateHandler,
  DeleteStateHandler,
];
