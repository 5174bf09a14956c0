import {
  fromSnapshot,
  snapshotSpacing,
  STATE_SNAPSHOT_SCHEMA,
  StateAggregate,
  StateCommand,
  stateDecider,
  StateEvent,
  stateStreamId,
  toSnapshot,
  toSnapshotText,
} from '../../domain/state';
import type { AggregateSpec } from '../decider.service';

/** The State aggregate, one stream per state name, for the DeciderService. */
export const STATE: AggregateSpec<StateCommand, StateAggregate, StateEvent> = {
  name: 'state',
  decider: stateDecider,
  streamOf: (command) => stateStreamId(command.data.name),
  snapshots: {
    schema: STATE_SNAPSHOT_SCHEMA,
    to: toSnapshot,
    text: toSnapshotText,
    from: fromSnapshot,
    spacing: snapshotSpacing,
  },
  done: whatWasDone,
};

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
    case 'AcquireReservations':
      return `reservations of run ${command.data.runId} acquired on state ${name}`;
    case 'RenewReservations':
      return `reservations of run ${command.data.runId} renewed on state ${name}`;
    case 'ReleaseReservations':
      return `reservations of run ${command.data.runId} released on state ${name}`;
    case 'CommitDelta':
      return state.status === 'active'
        ? `committed as version ${state.version} of state ${name}`
        : `committed to state ${name}`;
    default: {
      const never: never = command;
      return String(never);
    }
  }
}
