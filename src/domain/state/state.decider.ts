import { Decider } from '../shared/decider';
import { DomainError } from '../shared/domain-error';
import { documentMeta } from '../terraform/build-document';
import { canonicalJson } from '../terraform/canonical-json';
import { diffInstances } from '../terraform/diff-instances';
import { diffOutputs, outputHashes } from '../terraform/diff-outputs';
import { LockInfo } from './lock-info';
import {
  CommitState,
  DeleteState,
  ForceUnlockState,
  LockState,
  StateCommand,
  UnlockState,
} from './state.commands';
import {
  STATE_LINEAGE_CONFLICT,
  STATE_LOCK_MISMATCH,
  STATE_LOCKED,
  STATE_NOT_FOUND,
  STATE_SERIAL_CONFLICT,
  STATE_VERSION_CONFLICT,
} from './state.errors';
import { StateCreated, StateEvent } from './state.events';
import { ActiveState, initialState, StateAggregate } from './state.model';

function assertNever(value: never): never {
  throw new Error(`unexpected ${JSON.stringify(value)}`);
}

function locked(name: string, holder: LockInfo): DomainError {
  return new DomainError(STATE_LOCKED, `state ${name} is locked by ${holder.ID}`, { holder });
}

function mismatch(name: string, holder: LockInfo, lockId: string): DomainError {
  return new DomainError(
    STATE_LOCK_MISMATCH,
    `state ${name} is locked by ${holder.ID}, not ${lockId}`,
    { holder },
  );
}

function notFound(name: string): DomainError {
  return new DomainError(STATE_NOT_FOUND, `state ${name} does not exist`);
}

/** The state to act on, and the events (if any) that bring it into being. */
function ensureActive(
  state: StateAggregate,
  name: string,
  newStateId: string,
): { active: ActiveState; created: StateEvent[] } {
  if (state.status === 'active') return { active: state, created: [] };
  // A deleted name starts over: new stateId, versions from 1, no instances.
  const created: StateCreated = { type: 'StateCreated', data: { stateId: newStateId, name } };
  return { active: evolve(state, created) as ActiveState, created: [created] };
}

function lock(command: LockState, state: StateAggregate): StateEvent[] {
  const { name, newStateId, lockInfo } = command.data;
  const { active, created } = ensureActive(state, name, newStateId);
  // Terraform makes a fresh lock ID (and timestamp) for every attempt, and
  // its HTTP client retries a request that failed with a 5xx. A LOCK whose
  // LockInfo is the holder's, member for member, is that retry: it holds the
  // lock already. One that only repeats the ID is another process reusing
  // it; granting it would let two processes share one lock, so it is refused
  // with the holder, and terraform's own retry loop (-lock-timeout) copes.
  if (active.lock !== null) {
    if (sameLockInfo(active.lock, lockInfo)) return [];
    throw locked(name, active.lock);
  }
  return [
    ...created,
    {
      type: 'LockAcquired',
      data: { stateId: active.stateId, lockId: lockInfo.ID, info: lockInfo },
    },
  ];
}

function unlock(command: UnlockState, state: StateAggregate): StateEvent[] {
  const { name, lockId } = command.data;
  if (state.status !== 'active') throw notFound(name);
  if (state.lock === null) return []; // already unlocked: a retried UNLOCK succeeds
  if (state.lock.ID !== lockId) throw mismatch(name, state.lock, lockId);
  return [{ type: 'LockReleased', data: { stateId: state.stateId, lockId, forced: false } }];
}

function forceUnlock(command: ForceUnlockState, state: StateAggregate): StateEvent[] {
  const { name, lockId } = command.data;
  if (state.status !== 'active') throw notFound(name);
  if (state.lock === null) return [];
  if (lockId !== undefined && state.lock.ID !== lockId) throw mismatch(name, state.lock, lockId);
  return [
    {
      type: 'LockReleased',
      data: { stateId: state.stateId, lockId: state.lock.ID, forced: true },
    },
  ];
}

function sameLockInfo(a: LockInfo, b: LockInfo): boolean {
  return canonicalJson(a) === canonicalJson(b);
}

/**
 * Is this commit a retry of the last one, whose answer the client never got?
 * The same bytes (checksum) from the same source, based on the version the
 * last commit was based on, while the lock it was made under is still held
 * (or none still is). Terraform writes only when its state changed, so it
 * never sends one document twice on purpose.
 */
function isRetryOfHead(command: CommitState, state: StateAggregate): boolean {
  if (state.status !== 'active' || state.head === null) return false;
  const { checksum, source, baseVersion, lockId } = command.data;
  const { head } = state;
  const heldNow = state.lock?.ID ?? null;
  return (
    head.checksum === checksum &&
    head.source === source &&
    (baseVersion === undefined || baseVersion === state.version - 1) &&
    head.lockId === heldNow &&
    (heldNow === null || lockId === heldNow)
  );
}

function commit(command: CommitState, state: StateAggregate): StateEvent[] {
  const {
    name,
    newStateId,
    document,
    lockId,
    source,
    checksum,
    baseVersion,
    checkContinuity,
    instances,
  } = command.data;
  if (isRetryOfHead(command, state)) return [];
  // A write based on a version must never bring a deleted state back.
  if (baseVersion !== undefined && state.status !== 'active') throw notFound(name);
  const { active, created } = ensureActive(state, name, newStateId);
  if (baseVersion !== undefined && active.version !== baseVersion) {
    throw new DomainError(
      STATE_VERSION_CONFLICT,
      `state ${name} is at version ${active.version}, not ${baseVersion}`,
      { expected: baseVersion, actual: active.version },
    );
  }
  // Without a lock anyone may write (terraform runs with -lock=false do);
  // with one, only its holder may.
  if (active.lock !== null) {
    if (lockId === undefined) throw locked(name, active.lock);
    if (lockId !== active.lock.ID) throw mismatch(name, active.lock, lockId);
  }

  const { serial, lineage } = document;
  if (checkContinuity) assertContinues(name, active, serial, lineage);
  const { stateId } = active;
  const version = active.version + 1;
  const delta = diffInstances(active.instances, instances);
  const meta = documentMeta(document);
  const outputChanges = diffOutputs(active.outputs, outputHashes(meta.outputs));

  const events: StateEvent[] = [
    ...created,
    {
      type: 'ApplyCommitted',
      data: {
        stateId,
        version,
        serial,
        lineage,
        ...(active.lineage !== null && active.lineage !== lineage
          ? { lineageChanged: { from: active.lineage, to: lineage } }
          : {}),
        source,
        terraformVersion: meta.terraformVersion,
        outputs: meta.outputs,
        outputChanges,
        checkResults: meta.checkResults,
        extra: meta.extra,
        checksum,
        instanceCount: instances.length,
        resourceCount: document.resources.length,
      },
    },
  ];
  for (const address of delta.closed) {
    const hash = active.instances.get(address) ?? '';
    events.push({
      type: 'LifecycleClosed',
      data: { stateId, version, serial, address, hash },
    });
  }
  for (const i of delta.opened) {
    events.push({
      type: 'LifecycleOpened',
      data: {
        stateId,
        version,
        serial,
        address: i.address,
        hash: i.hash,
        resource: i.resource,
        instance: i.instance,
      },
    });
  }
  return events;
}

/** The checks `terraform state push` makes unless forced; a state with no version takes anything. */
function assertContinues(name: string, active: ActiveState, serial: number, lineage: string): void {
  if (active.lineage === null || active.serial === null) return;
  if (lineage !== active.lineage) {
    throw new DomainError(
      STATE_LINEAGE_CONFLICT,
      `state ${name} has lineage "${active.lineage}", the document has lineage "${lineage}"`,
      { current: active.lineage, sent: lineage },
    );
  }
  if (serial < active.serial) {
    throw new DomainError(
      STATE_SERIAL_CONFLICT,
      `state ${name} is at serial ${active.serial}, the document has the older serial ${serial}`,
      { current: active.serial, sent: serial },
    );
  }
}

function deleteState(command: DeleteState, state: StateAggregate): StateEvent[] {
  const { name } = command.data;
  if (state.status !== 'active') throw notFound(name);
  if (state.lock !== null) throw locked(name, state.lock);
  return [{ type: 'StateDeleted', data: { stateId: state.stateId } }];
}

export function decide(command: StateCommand, state: StateAggregate): StateEvent[] {
  switch (command.type) {
    case 'LockState':
      return lock(command, state);
    case 'UnlockState':
      return unlock(command, state);
    case 'ForceUnlockState':
      return forceUnlock(command, state);
    case 'CommitState':
      return commit(command, state);
    case 'DeleteState':
      return deleteState(command, state);
    default:
      return assertNever(command);
  }
}

/**
 * Events that cannot follow the current status (only a corrupt history has
 * them) leave the state unchanged rather than making the stream unloadable.
 *
 * The instance map is copied once per commit, on ApplyCommitted, and that
 * commit's lifecycle events then update the copy in place: a copy per
 * lifecycle event would make a 10k-instance first commit quadratic. States
 * from before the commit never see the change.
 */
export function evolve(state: StateAggregate, event: StateEvent): StateAggregate {
  switch (event.type) {
    case 'StateCreated':
      return {
        status: 'active',
        stateId: event.data.stateId,
        name: event.data.name,
        lock: null,
        version: 0,
        serial: null,
        lineage: null,
        instances: new Map(),
        outputs: new Map(),
        head: null,
      };
    case 'LockAcquired':
      return state.status === 'active' ? { ...state, lock: event.data.info } : state;
    case 'LockReleased':
      return state.status === 'active' ? { ...state, lock: null } : state;
    case 'ApplyCommitted':
      if (state.status !== 'active') return state;
      return {
        ...state,
        version: event.data.version,
        serial: event.data.serial,
        lineage: event.data.lineage,
        instances: new Map(state.instances),
        outputs: outputHashes(event.data.outputs),
        head: {
          checksum: event.data.checksum,
          source: event.data.source,
          lockId: state.lock?.ID ?? null,
        },
      };
    case 'LifecycleOpened':
      if (state.status !== 'active') return state;
      state.instances.set(event.data.address, event.data.hash);
      return { ...state };
    case 'LifecycleClosed':
      if (state.status !== 'active') return state;
      state.instances.delete(event.data.address);
      return { ...state };
    case 'StateDeleted':
      if (state.status !== 'active') return state;
      return { status: 'deleted', stateId: state.stateId, name: state.name };
    default:
      return assertNever(event);
  }
}

export { initialState };

export const stateDecider: Decider<StateCommand, StateAggregate, StateEvent> = {
  decide,
  evolve,
  initialState,
};
