import { DomainError } from '../shared/domain-error';
import { buildDocument } from '../terraform/build-document';
import { canonicalJson } from '../terraform/canonical-json';
import { isJsonObject, JsonObject, JsonValue, sameJson } from '../terraform/json-value';
import { parseStateDocument } from '../terraform/parse-state-document';
import { InstanceObjectV4 } from '../terraform/state-document';
import {
  flattenInstances,
  instanceHash,
  InstanceHasher,
  ResourceDescriptor,
} from '../terraform/state-instances';
import { parseLockInfo } from './lock-info';
import { CommitSource, StateCommand } from './state.commands';
import { decide, evolve } from './state.decider';
import { ApplyCommitted, LockAcquired, StateEvent, STATE_EVENT_TYPES } from './state.events';
import { HeldLock, initialState, StateAggregate } from './state.model';

/** An archive whose history is not one the State aggregate could have written. */
export const ARCHIVE_INVALID = 'ARCHIVE.INVALID';

const COMMIT_SOURCES: readonly CommitSource[] = [
  'http',
  'import',
  'refresh',
  'apply',
  'state-engine',
  'rollback',
];
const MAX_CHECKSUM = 200;

export interface ArchivedStateEvent {
  type: string;
  data: unknown;
}

export interface ReplayedHistory {
  /** The archive's events under the new name and state ids, in the archive's order. */
  events: StateEvent[];
  versions: number;
}

/**
 * Checks that an archived history of a state stream is one the State decider
 * writes, and returns it under `name` with new state ids (`newStateId`, one
 * per StateCreated): the history is replayed command by command (a lock, an
 * unlock, a commit of the document its lifecycle events make, a delete), and
 * every archived event must be what the decider decides. So an import stores
 * nothing the live write path would not have stored, and the read models
 * project it exactly as they project live events.
 *
 * A commit's document is rebuilt from the lifecycle events before it, so
 * each instance is checked (and hashed) once, not once per version.
 */
export function replayStateHistory(
  all: readonly ArchivedStateEvent[],
  name: string,
  newStateId: () => string,
): ReplayedHistory {
  // Quota overruns were judged by the exporting server's quotas: records
  // about that history, not part of it. The importing server's own quotas
  // judge what is committed from now on.
  const archived = all.filter((e) => e.type !== 'QuotaExceeded');
  let state: StateAggregate = initialState();
  const ids = new Map<string, string>();
  let instances = new Map<string, Placed>();
  const verified = new WeakMap<object, { resource: ResourceDescriptor; hash: string }>();
  const hashInstance: InstanceHasher = (_address, resource, instance) => {
    const known = verified.get(instance);
    return known && sameDescriptor(known.resource, resource)
      ? known.hash
      : instanceHash(resource, instance);
  };
  const out: StateEvent[] = [];
  let versions = 0;

  for (let at = 0; at < archived.length;) {
    const group = groupAt(archived, at);
    const remapped = group.map((e, i) => remap(e, at + i, ids, name, newStateId));
    let next = instances;
    let command: StateCommand;
    try {
      ({ command, next } = commandFor(remapped, state, name, instances, hashInstance));
    } catch (err) {
      throw invalid(at, group[0].type, reason(err));
    }
    let decided: StateEvent[];
    try {
      decided = decide(command, state);
    } catch (err) {
      throw invalid(at, group[0].type, `the state would refuse it: ${reason(err)}`);
    }
    const mismatch = difference(decided, remapped);
    if (mismatch !== null) throw invalid(at, group[0].type, mismatch);
    for (const e of decided) {
      state = evolve(state, e);
      if (e.type === 'LifecycleOpened') {
        verified.set(e.data.instance, { resource: e.data.resource, hash: e.data.hash });
      }
      if (e.type === 'ApplyCommitted') versions++;
    }
    instances = next;
    out.push(...remapped);
    at += group.length;
  }
  return { events: out, versions };
}

type Placed = { resource: ResourceDescriptor; instance: InstanceObjectV4 };

/** The events one command wrote: what starts at `at`. */
function groupAt(archived: readonly ArchivedStateEvent[], at: number): ArchivedStateEvent[] {
  let end = at + 1;
  if (archived[at].type === 'StateCreated') end++;
  if (archived[end - 1]?.type === 'ApplyCommitted') {
    while (end < archived.length && archived[end].type.startsWith('Lifecycle')) end++;
  }
  return archived.slice(at, Math.min(end, archived.length));
}

function commandFor(
  group: StateEvent[],
  state: StateAggregate,
  name: string,
  instances: Map<string, Placed>,
  hashInstance: InstanceHasher,
): { command: StateCommand; next: Map<string, Placed> } {
  const metadata = { actor: 'archive', correlationId: 'archive', now: '1970-01-01T00:00:00Z' };
  const created = group[0].type === 'StateCreated' ? group[0] : null;
  const main = created ? group[1] : group[0];
  const newStateId = created ? created.data.stateId : '';
  const single = (command: StateCommand) => {
    if (created || group.length !== 1) throw new Error('it must stand alone');
    return { command, next: instances };
  };
  switch (main?.type) {
    case 'LockAcquired':
      if (group.length !== (created ? 2 : 1)) throw new Error('a lock stands alone');
      return {
        command: {
          type: 'LockState',
          data: { name, newStateId, lockInfo: parseLockInfo(main.data.info) },
          // The decider records when a lock was taken: the archived time, where it has one.
          metadata: main.data.acquiredAt ? { ...metadata, now: main.data.acquiredAt } : metadata,
        },
        next: instances,
      };
    case 'LockReleased':
      return single(
        main.data.forced
          ? { type: 'ForceUnlockState', data: { name, lockId: main.data.lockId }, metadata }
          : { type: 'UnlockState', data: { name, lockId: main.data.lockId }, metadata },
      );
    case 'StateDeleted':
      return single({ type: 'DeleteState', data: { name }, metadata });
    case 'ApplyCommitted': {
      const next = new Map(instances);
      for (const e of group.slice(created ? 2 : 1)) {
        if (e.type === 'LifecycleClosed') next.delete(e.data.address);
        else if (e.type === 'LifecycleOpened') {
          checkInstance(e.data.resource, e.data.instance);
          next.set(e.data.address, { resource: e.data.resource, instance: e.data.instance });
        }
      }
      const d = main.data;
      if (!COMMIT_SOURCES.includes(d.source)) throw new Error(`unknown source "${d.source}"`);
      if (typeof d.checksum !== 'string' || d.checksum.length > MAX_CHECKSUM) {
        throw new Error('checksum must be a short string');
      }
      const meta = {
        terraformVersion: d.terraformVersion,
        serial: d.serial,
        lineage: d.lineage,
        outputs: d.outputs,
        checkResults: d.checkResults,
        extra: isJsonObject(d.extra) ? d.extra : {},
      };
      // What the POST path checks, on everything but the instances (checked above).
      parseStateDocument(buildDocument(meta, []));
      const document = buildDocument(meta, next.values());
      return {
        command: {
          type: 'CommitState',
          data: {
            name,
            newStateId,
            document,
            instances: flattenInstances(document, hashInstance),
            ...(state.status === 'active' ? committerLock(state.locks) : {}),
            source: d.source,
            checksum: d.checksum,
            // Never a retry of the version before, as the original was not.
            ...(state.status === 'active' ? { baseVersion: state.version } : {}),
          },
          metadata,
        },
        next,
      };
    }
    case 'ReservationAcquired':
    case 'ReservationRenewed':
    case 'ReservationReleased':
    case 'ReservationExpired':
      throw new Error(
        'histories with kl apply runs cannot be recreated from an archive yet ' +
          '(their reservations and row-level commits are not replayed)',
      );
    default:
      throw new Error(
        created && !main ? 'a state is created by a lock or a commit' : 'it cannot start a command',
      );
  }
}

/** The lock a commit was made under: the write lock, when one is held. */
function committerLock(locks: ReadonlyMap<string, HeldLock>): { lockId?: string } {
  for (const [id, lock] of locks) if (lock.mode === 'write') return { lockId: id };
  return {};
}

/** The instance as a one-instance document would carry it, checked like a POST. */
function checkInstance(resource: ResourceDescriptor, instance: InstanceObjectV4): void {
  if (!isJsonObject(resource) || !isJsonObject(instance as unknown as JsonValue)) {
    throw new Error('a lifecycle needs a resource and an instance');
  }
  parseStateDocument(
    buildDocument(
      {
        terraformVersion: '1.0.0',
        serial: 0,
        lineage: '',
        outputs: {},
        checkResults: null,
        extra: {},
      },
      [{ resource, instance }],
    ),
  );
}

/** The archived event under the new name and state id; checks the shape every state event has. */
function remap(
  e: ArchivedStateEvent,
  at: number,
  ids: Map<string, string>,
  name: string,
  newStateId: () => string,
): StateEvent {
  if (!STATE_EVENT_TYPES.includes(e.type)) {
    throw invalid(at, e.type, 'not an event of a state stream');
  }
  if (!isJsonObject(e.data as JsonValue) || typeof (e.data as JsonObject).stateId !== 'string') {
    throw invalid(at, e.type, 'its data has no stateId');
  }
  const data = e.data as JsonObject & { stateId: string };
  if (e.type === 'StateCreated') {
    if (ids.has(data.stateId)) throw invalid(at, e.type, 'its stateId was created before');
    ids.set(data.stateId, newStateId());
  }
  const stateId = ids.get(data.stateId);
  if (stateId === undefined) throw invalid(at, e.type, 'its stateId was never created');
  return {
    type: e.type,
    data: { ...data, stateId, ...(e.type === 'StateCreated' ? { name } : {}) },
  } as StateEvent;
}

/**
 * Null when the archive holds exactly the decided events; lifecycle events of
 * one commit in any order. A commit's resource count may be higher than the
 * rebuilt document's: resources without instances are not in the lifecycles.
 */
function difference(decided: StateEvent[], archived: StateEvent[]): string | null {
  const archivedCommit = archived.find((e) => e.type === 'ApplyCommitted') as
    ApplyCommitted | undefined;
  // Commits written before the decider recorded outputChanges have none
  // (readers compare outputs then): such an archive is compared without them.
  const withoutOutputChanges =
    archivedCommit !== undefined && !('outputChanges' in archivedCommit.data);
  // Locks written before plans shared carry neither mode nor acquiredAt.
  const lockBeforeModes = archived.some((e) => e.type === 'LockAcquired' && !('mode' in e.data));
  const key = (e: StateEvent, commitResources?: number) => {
    if (e.type === 'LockAcquired' && lockBeforeModes) {
      const data: Partial<LockAcquired['data']> = { ...e.data };
      delete data.mode;
      delete data.acquiredAt;
      return canonicalJson({ type: e.type, data } as unknown as JsonValue);
    }
    if (e.type !== 'ApplyCommitted') {
      return canonicalJson({ type: e.type, data: e.data } as unknown as JsonValue);
    }
    const data: Partial<ApplyCommitted['data']> = { ...e.data };
    if (commitResources !== undefined) data.resourceCount = commitResources;
    if (withoutOutputChanges) delete data.outputChanges;
    return canonicalJson({ type: e.type, data } as unknown as JsonValue);
  };
  const decidedCommit = decided.find((e) => e.type === 'ApplyCommitted') as
    ApplyCommitted | undefined;
  let resources: number | undefined;
  if (archivedCommit && decidedCommit) {
    const claimed = archivedCommit.data.resourceCount;
    if (!Number.isInteger(claimed) || claimed < decidedCommit.data.resourceCount) {
      return `its resource count ${claimed} is below the ${decidedCommit.data.resourceCount} resources its instances make`;
    }
    resources = claimed;
  }
  const a = decided.map((e) => key(e, resources)).sort();
  const b = archived.map((e) => key(e, resources)).sort();
  if (a.length !== b.length) {
    return `the state writes ${a.length} events for it, the archive has ${b.length}`;
  }
  const i = a.findIndex((x, n) => x !== b[n]);
  if (i >= 0) {
    return `the state would write ${a[i].slice(0, 200)}, the archive has ${b[i].slice(0, 200)}`;
  }
  return null;
}

function sameDescriptor(a: ResourceDescriptor, b: ResourceDescriptor): boolean {
  return a === b || sameJson({ ...a } as unknown as JsonValue, { ...b } as unknown as JsonValue);
}

function reason(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function invalid(at: number, type: string, why: string): DomainError {
  return new DomainError(
    ARCHIVE_INVALID,
    `archive event ${at} (${type.slice(0, 60)}) is not a history this state could have: ${why}`,
  );
}
