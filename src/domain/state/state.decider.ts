import { ALL_ADDRESSES } from '../reservations/address-glob';
import { Decider } from '../shared/decider';
import { DomainError } from '../shared/domain-error';
import { documentMeta } from '../terraform/build-document';
import { canonicalJson } from '../terraform/canonical-json';
import { diffInstances } from '../terraform/diff-instances';
import { diffOutputs, outputHashes } from '../terraform/diff-outputs';
import { commitDelta } from './commit-delta';
import { APPLY_OPERATION, conflictsWith, lockMode, reclaim } from './holders';
import { LockInfo } from './lock-info';
import { quotaOverrun, refuseOverQuota } from './quota-checks';
import { acquireReservations, releaseReservations, renewReservations } from './reserve';
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
import { evolve } from './state.evolve';
import { ActiveState, initialState, StateAggregate } from './state.model';

function assertNever(value: never): never {
  throw new Error(`unexpected ${JSON.stringify(value)}`);
}

export function locked(name: string, holder: LockInfo): DomainError {
  return new DomainError(STATE_LOCKED, `state ${name} is locked by ${holder.ID}`, { holder });
}

function mismatch(name: string, holder: LockInfo, lockId: string): DomainError {
  return new DomainError(
    STATE_LOCK_MISMATCH,
    `state ${name} is locked by ${holder.ID}, not ${lockId}`,
    { holder },
  );
}

export function notFound(name: string): DomainError {
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

/** The write lock, if one is held (there is at most one); else the oldest lock. */
function mainLock(state: ActiveState): LockInfo | null {
  let first: LockInfo | null = null;
  for (const lock of state.locks.values()) {
    if (lock.mode === 'write') return lock.info;
    first ??= lock.info;
  }
  return first;
}

/**
 * A terraform LOCK is a reservation of every address: to write, or, for a
 * plan, to read (shared with other plans). It waits for whoever holds
 * anything that conflicts: a write lock, any lock for a writer, an apply
 * run's reservations. A run whose lease ran out is reclaimed instead.
 */
function lock(command: LockState, state: StateAggregate): StateEvent[] {
  const { name, newStateId, lockInfo } = command.data;
  const { active, created } = ensureActive(state, name, newStateId);
  // Terraform makes a fresh lock ID (and timestamp) for every attempt, and
  // its HTTP client retries a request that failed with a 5xx. A LOCK whose
  // LockInfo is the holder's, member for member, is that retry: it holds the
  // lock already. One that only repeats the ID is another process reusing
  // it; granting it would let two processes share one lock, so it is refused
  // with the holder, and terraform's own retry loop (-lock-timeout) copes.
  const held = active.locks.get(lockInfo.ID);
  if (held) {
    if (sameLockInfo(held.info, lockInfo)) return [];
    throw locked(name, held.info);
  }
  const mode = lockMode(lockInfo);
  const now = command.metadata.now;
  const { live, expired } = conflictsWith(active, [{ glob: ALL_ADDRESSES, mode }], {}, now);
  if (live.length > 0) throw locked(name, live[0].lockInfo);
  // Only applies: plans, state pushes, imports and force-unlocks stay possible.
  if (lockInfo.Operation === APPLY_OPERATION) {
    refuseOverQuota(active, command.data.quota, { operation: APPLY_OPERATION, now });
  }
  return [
    ...created,
    ...reclaim(active, expired, lockInfo.ID),
    {
      type: 'LockAcquired',
      data: { stateId: active.stateId, lockId: lockInfo.ID, info: lockInfo, mode, acquiredAt: now },
    },
  ];
}

function unlock(command: UnlockState, state: StateAggregate): StateEvent[] {
  const { name, lockId } = command.data;
  if (state.status !== 'active') throw notFound(name);
  if (state.locks.has(lockId)) {
    return [{ type: 'LockReleased', data: { stateId: state.stateId, lockId, forced: false } }];
  }
  // Not held: a retried UNLOCK, or one for a lock long gone. Only another
  // process's write lock makes that worth refusing; plans of others stay.
  const writer = [...state.locks.values()].find((l) => l.mode === 'write');
  if (writer) throw mismatch(name, writer.info, lockId);
  return [];
}

/**
 * Without an ID (`terraform force-unlock`, whose UNLOCK carries no body)
 * every terraform lock goes; with one, only that lock. Apply runs are not
 * terraform's to release: `kl apply abort` ends them.
 */
function forceUnlock(command: ForceUnlockState, state: StateAggregate): StateEvent[] {
  const { name, lockId } = command.data;
  if (state.status !== 'active') throw notFound(name);
  const { stateId } = state;
  if (lockId === undefined) {
    return [...state.locks.keys()].map((id) => ({
      type: 'LockReleased',
      data: { stateId, lockId: id, forced: true },
    }));
  }
  if (state.locks.has(lockId)) {
    return [{ type: 'LockReleased', data: { stateId, lockId, forced: true } }];
  }
  const holder = mainLock(state);
  if (holder !== null) throw mismatch(name, holder, lockId);
  return [];
}

function sameLockInfo(a: LockInfo, b: LockInfo): boolean {
  return canonicalJson(a) === canonicalJson(b);
}

/** The one terraform lock held, null when none is, undefined when several are. */
function soleLock(state: ActiveState): string | null | undefined {
  if (state.locks.size === 0) return null;
  if (state.locks.size > 1) return undefined;
  return state.locks.keys().next().value as string;
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
  const heldNow = soleLock(state);
  return (
    head.checksum === checksum &&
    head.source === source &&
    (head.runId ?? null) === null &&
    (baseVersion === undefined || baseVersion === state.version - 1) &&
    heldNow !== undefined &&
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
  // with one, only its holder may. A whole document rewrites every address,
  // so any other holder (a plan, an apply run) is in the way.
  const held = mainLock(active);
  if (held !== null) {
    if (lockId === undefined) throw locked(name, held);
    if (!active.locks.has(lockId)) throw mismatch(name, held, lockId);
  }
  const now = command.metadata.now;
  const asker = lockId === undefined ? {} : { lockId };
  const { live, expired } = conflictsWith(
    active,
    [{ glob: ALL_ADDRESSES, mode: 'write' }],
    asker,
    now,
  );
  if (live.length > 0) throw locked(name, live[0].lockInfo);

  const { serial, lineage } = document;
  if (checkContinuity) assertContinues(name, active, serial, lineage);
  const { stateId } = active;
  const version = active.version + 1;
  const delta = diffInstances(active.instances, instances);
  const meta = documentMeta(document);
  const outputChanges = diffOutputs(active.outputs, outputHashes(meta.outputs));

  const events: StateEvent[] = [
    ...created,
    ...reclaim(active, expired, lockId ?? `version ${version}`),
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
  if (command.data.quota !== undefined) {
    const count = instances.filter(
      (i) => i.resource.mode === 'managed' && i.instance.deposed === undefined,
    ).length;
    events.push(...quotaOverrun(active, command.data.quota, version, count));
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
  const { live, expired } = conflictsWith(
    state,
    [{ glob: ALL_ADDRESSES, mode: 'write' }],
    {},
    command.metadata.now,
  );
  if (live.length > 0) throw locked(name, live[0].lockInfo);
  return [
    ...reclaim(state, expired, 'delete'),
    { type: 'StateDeleted', data: { stateId: state.stateId } },
  ];
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
    case 'AcquireReservations':
      return acquireReservations(command, state);
    case 'RenewReservations':
      return renewReservations(command, state);
    case 'ReleaseReservations':
      return releaseReservations(command, state);
    case 'CommitDelta':
      return commitDelta(command, state);
    default:
      return assertNever(command);
  }
}

export { evolve, initialState };

export const stateDecider: Decider<StateCommand, StateAggregate, StateEvent> = {
  decide,
  evolve,
  initialState,
};
