import { DomainEvent } from '../shared/event';
import { JsonObject, JsonValue } from '../terraform/json-value';
import { OutputDelta } from '../terraform/diff-outputs';
import { InstanceObjectV4, OutputV4 } from '../terraform/state-document';
import { ResourceDescriptor } from '../terraform/state-instances';
import { CommitSource } from './state.commands';
import { LockInfo } from './lock-info';

/** Event type names are part of the public log format: written literally, never derived. */
export const StateEventType = {
  StateCreated: 'StateCreated',
  LockAcquired: 'LockAcquired',
  LockReleased: 'LockReleased',
  ApplyCommitted: 'ApplyCommitted',
  LifecycleOpened: 'LifecycleOpened',
  LifecycleClosed: 'LifecycleClosed',
  StateDeleted: 'StateDeleted',
} as const;

export const STATE_EVENT_TYPES: readonly string[] = Object.values(StateEventType);

export type StateCreated = DomainEvent<'StateCreated', { stateId: string; name: string }>;

export type LockAcquired = DomainEvent<
  'LockAcquired',
  { stateId: string; lockId: string; info: LockInfo }
>;

export type LockReleased = DomainEvent<
  'LockReleased',
  { stateId: string; lockId: string; forced: boolean }
>;

export type ApplyCommitted = DomainEvent<
  'ApplyCommitted',
  {
    stateId: string;
    /** Ours: 1, 2, 3… per stateId, one per accepted commit. */
    version: number;
    /** Terraform's, as sent; may repeat or go backwards. */
    serial: number;
    lineage: string;
    /** Present only when this version's lineage differs from the previous version's. */
    lineageChanged?: { from: string; to: string };
    source: CommitSource;
    terraformVersion: string;
    outputs: Record<string, OutputV4>;
    /**
     * The outputs this version closed and opened (changed ones are both).
     * Absent in events written before the decider made this decision: a
     * reader of those compares the outputs with the previous version's.
     */
    outputChanges?: OutputDelta;
    checkResults: JsonValue;
    /** Unknown top-level members of the document. */
    extra: JsonObject;
    checksum: string;
    instanceCount: number;
    resourceCount: number;
  }
>;

export type LifecycleOpened = DomainEvent<
  'LifecycleOpened',
  {
    stateId: string;
    version: number;
    serial: number;
    address: string;
    hash: string;
    resource: ResourceDescriptor;
    instance: InstanceObjectV4;
  }
>;

export type LifecycleClosed = DomainEvent<
  'LifecycleClosed',
  { stateId: string; version: number; serial: number; address: string; hash: string }
>;

export type StateDeleted = DomainEvent<'StateDeleted', { stateId: string }>;

export type StateEvent =
  | StateCreated
  | LockAcquired
  | LockReleased
  | ApplyCommitted
  | LifecycleOpened
  | LifecycleClosed
  | StateDeleted;

export function isStateEvent(event: DomainEvent): event is StateEvent {
  return STATE_EVENT_TYPES.includes(event.type);
}
