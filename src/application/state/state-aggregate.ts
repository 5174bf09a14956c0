import {
  fromSnapshot,
  STATE_SNAPSHOT_SCHEMA,
  StateAggregate,
  StateCommand,
  stateDecider,
  StateEvent,
  stateStreamId,
  toSnapshot,
} from '../../domain/state';
import type { CommandContext } from '../../domain/shared/event';
import { AggregateStore } from '../aggregate-store';
import type { Clock, Ids } from '../ports/clock.port';
import type { EventStore } from '../ports/event-store.port';
import { awaitReadModels, ReadModelSync } from '../ports/read-model-sync.port';
import type { SnapshotStore } from '../ports/snapshot-store.port';
import { InstanceHashMemo } from './instance-hash-memo';
import { Caller, commandContext } from '../command-context';

export const STATE_AGGREGATE = Symbol('StateAggregate');

/**
 * Runs one State command end to end: decide on the stream, append, then wait
 * until the read models include the new events, so the next request (on any
 * replica) reads what this one wrote.
 */
export class StateAggregateService {
  private readonly store: AggregateStore<StateCommand, StateAggregate, StateEvent>;
  private readonly hashes = new InstanceHashMemo();

  constructor(
    events: EventStore,
    snapshots: SnapshotStore,
    private readonly sync: ReadModelSync,
    private readonly clock: Clock,
    private readonly ids: Ids,
  ) {
    this.store = new AggregateStore(events, snapshots, stateDecider, {
      ids,
      snapshotSchema: STATE_SNAPSHOT_SCHEMA,
      toSnapshot,
      fromSnapshot,
    });
  }

  context(caller: Caller): CommandContext {
    return commandContext(caller, this.clock);
  }

  newStateId(): string {
    return this.ids.uuid();
  }

  async execute(
    name: string,
    command: StateCommand,
  ): Promise<{ events: StateEvent[]; state: StateAggregate }> {
    const streamId = stateStreamId(name);
    if (command.type !== 'CommitState' || command.data.hashInstance) {
      return this.run(streamId, command);
    }
    const memo = this.hashes.open(streamId);
    try {
      return await this.run(streamId, {
        ...command,
        data: { ...command.data, hashInstance: memo.hash },
      });
    } finally {
      memo.done();
    }
  }

  private async run(
    streamId: string,
    command: StateCommand,
  ): Promise<{ events: StateEvent[]; state: StateAggregate }> {
    const { events, state, readAt } = await this.store.handle(streamId, command, command.metadata);
    await awaitReadModels(this.sync, readAt, () => whatWasDone(command, state));
    return { events, state };
  }
}

/** For an answer whose read models lag: what the command did, which is durable. */
function whatWasDone(command: StateCommand, state: StateAggregate): string {
  const { name } = command.data;
  switch (command.type) {
    case 'LockState':
      return `lock ${command.data.lockInfo.ID} acquired on state ${name}`;
    case 'UnlockState':
      return `lock ${command.data.lockId} released on state ${name}`;
    case 'ForceUnlockState':
      return `state ${name} unlocked`;
    case 'CommitState':
      return state.status === 'active'
        ? `written as version ${state.version} of state ${name}`
        : `written to state ${name}`;
    case 'DeleteState':
      return `state ${name} deleted`;
    default: {
      const never: never = command;
      return String(never);
    }
  }
}
