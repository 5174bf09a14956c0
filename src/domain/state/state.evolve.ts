import { canonicalJson } from '../terraform/canonical-json';
import { outputHashes } from '../terraform/diff-outputs';
import {
  formatIndexKey,
  formatResourceAddress,
  parseInstanceAddress,
} from '../terraform/instance-address';
import { LayeredMap } from '../shared/layered-map';
import { rememberingLast } from '../shared/remembering-last';
import { ResourceDescriptor } from '../terraform/state-instances';
import { JsonObject } from '../terraform/json-value';
import { derivedFrom } from './holders';
import { ReservationAcquired, StateEvent } from './state.events';
import { ActiveState, Reservation, ResourceEntry, StateAggregate } from './state.model';

function assertNever(value: never): never {
  throw new Error(`unexpected ${JSON.stringify(value)}`);
}

/**
 * The resource-level fields instances of one resource must share, as one
 * comparable string; remembered for the descriptor asked last (a commit's
 * events of one resource come one after another and share it).
 */
export const resourceFields: (resource: ResourceDescriptor) => string = rememberingLast(
  (resource: ResourceDescriptor) =>
    JSON.stringify([
      resource.provider,
      resource.each,
      resource.extra === undefined ? null : canonicalJson(resource.extra),
    ]),
);

/**
 * The resource address of an instance address whose key and deposed key
 * are known: the address without them (cheaper than parsing it).
 */
export function resourceAddressOf(
  address: string,
  key: string | number | undefined,
  deposed: string | undefined,
): string {
  let cut = deposed === undefined ? 0 : ` (deposed object ${deposed})`.length;
  if (key !== undefined) cut += formatIndexKey(key).length;
  return cut === 0 ? address : address.slice(0, address.length - cut);
}

function resourceAddressOfClosed(address: string): string {
  return formatResourceAddress(parseInstanceAddress(address));
}

function withResource(
  resources: LayeredMap<string, ResourceEntry>,
  address: string,
  fields: string,
  change: 1 | -1,
): void {
  const entry = resources.get(address);
  const instances = (entry?.instances ?? 0) + change;
  // Entries are replaced, never changed: a copied map shares them with the state before.
  if (instances <= 0) resources.delete(address);
  else
    resources.set(address, { fields: change > 0 ? fields : (entry?.fields ?? fields), instances });
}

function withReservations(
  state: ActiveState,
  change: (reservations: Map<string, Reservation>) => void,
): ActiveState {
  const reservations = new Map(state.reservations);
  change(reservations);
  // The glob indexes of the reservations before are brought up to date, not built again.
  derivedFrom(reservations, state.reservations);
  return { ...state, reservations };
}

/** Reservations gone: a run left holding none has no info any more. */
function withoutReservations(state: ActiveState, runId: string, ids: string[]): ActiveState {
  const next = withReservations(state, (rs) => {
    for (const id of ids) rs.delete(id);
  });
  if (!state.runInfo.has(runId)) return next;
  for (const r of next.reservations.values()) if (r.runId === runId) return next;
  const runInfo = new Map(state.runInfo);
  runInfo.delete(runId);
  return { ...next, runInfo };
}

/**
 * A run's reservations, one event per glob. The first of a run (it holds
 * none yet) starts a new state and records the run's info; the decider
 * grants a run nothing more while it holds reservations, so the run's
 * other events follow that one in the same append and add to the maps it
 * made, in place (as lifecycle events after their ApplyCommitted): a copy
 * per glob would make a run of N globs quadratic. Every reservation of the
 * run shares the one info object. Events of schema version 1 each carry
 * the info (the same, by construction): the first's is kept.
 */
function acquired(state: ActiveState, d: ReservationAcquired['data']): ActiveState {
  const held = state.runInfo.get(d.runId);
  const reservation = (info: JsonObject): Reservation => ({
    id: d.reservationId,
    runId: d.runId,
    glob: d.glob,
    mode: d.mode,
    holder: d.holder,
    info,
    acquiredAt: d.acquiredAt,
    expiresAt: d.expiresAt,
  });
  if (held !== undefined) {
    state.reservations.set(d.reservationId, reservation(held));
    return state;
  }
  // Only a damaged history has a run's later reservation without its first.
  const info = d.info ?? {};
  const next = withReservations(state, (rs) => rs.set(d.reservationId, reservation(info)));
  return { ...next, runInfo: new Map(state.runInfo).set(d.runId, info) };
}

/**
 * Events that cannot follow the current status (only a corrupt history has
 * them) leave the state unchanged rather than making the stream unloadable.
 *
 * The instance maps are copied once per commit, on ApplyCommitted, and that
 * commit's lifecycle events then update the copies in place: a copy per
 * lifecycle event would make a 10k-instance first commit quadratic. States
 * from before the commit never see the change. A copy costs what earlier
 * commits changed, not the state's size (LayeredMap).
 */
export function evolve(state: StateAggregate, event: StateEvent): StateAggregate {
  switch (event.type) {
    case 'StateCreated':
      return {
        status: 'active',
        stateId: event.data.stateId,
        name: event.data.name,
        locks: new Map(),
        reservations: new Map(),
        runInfo: new Map(),
        version: 0,
        serial: null,
        lineage: null,
        instances: LayeredMap.of(),
        outputs: new Map(),
        changedIn: LayeredMap.of(),
        resources: LayeredMap.of(),
        meta: null,
        head: null,
      };
    case 'LockAcquired': {
      if (state.status !== 'active') return state;
      const locks = new Map(state.locks);
      const { info, mode, acquiredAt } = event.data;
      locks.set(event.data.lockId, { info, mode: mode ?? 'write', acquiredAt: acquiredAt ?? null });
      return { ...state, locks };
    }
    case 'LockReleased': {
      if (state.status !== 'active') return state;
      const locks = new Map(state.locks);
      locks.delete(event.data.lockId);
      return { ...state, locks };
    }
    case 'ApplyCommitted': {
      if (state.status !== 'active') return state;
      const d = event.data;
      return {
        ...state,
        version: d.version,
        serial: d.serial,
        lineage: d.lineage,
        instances: state.instances.copy(),
        outputs: outputHashes(d.outputs),
        changedIn: state.changedIn.copy(),
        resources: state.resources.copy(),
        meta: {
          terraformVersion: d.terraformVersion,
          outputs: d.outputs,
          checkResults: d.checkResults,
          extra: d.extra,
        },
        head: {
          checksum: d.checksum,
          source: d.source,
          lockId: state.locks.size === 1 ? (state.locks.keys().next().value as string) : null,
          runId: d.runId ?? null,
        },
      };
    }
    case 'LifecycleOpened': {
      if (state.status !== 'active') return state;
      const { address, hash, resource, instance, version } = event.data;
      const replaced = state.instances.has(address);
      state.instances.set(address, hash);
      state.changedIn.set(address, version);
      if (!replaced) {
        const at = resourceAddressOf(address, instance.index_key, instance.deposed);
        withResource(state.resources, at, resourceFields(resource), 1);
      }
      // Only the maps changed, in place (see above): a copy of the state
      // itself, one per event, would be a new object holding the same maps.
      return state;
    }
    case 'LifecycleClosed': {
      if (state.status !== 'active') return state;
      const { address, version } = event.data;
      state.changedIn.set(address, version);
      if (state.instances.delete(address)) {
        withResource(state.resources, resourceAddressOfClosed(address), '', -1);
      }
      return state;
    }
    case 'StateDeleted':
      if (state.status !== 'active') return state;
      return { status: 'deleted', stateId: state.stateId, name: state.name };
    case 'ReservationAcquired':
      if (state.status !== 'active') return state;
      return acquired(state, event.data);
    case 'ReservationRenewed': {
      if (state.status !== 'active') return state;
      const { reservationIds, expiresAt } = event.data;
      return withReservations(state, (rs) => {
        for (const id of reservationIds) {
          const r = rs.get(id);
          if (r) rs.set(id, { ...r, expiresAt });
        }
      });
    }
    case 'QuotaExceeded':
      // A record for people: it decides nothing.
      return state;
    case 'ReservationReleased':
    case 'ReservationExpired':
      if (state.status !== 'active') return state;
      return withoutReservations(state, event.data.runId, event.data.reservationIds);
    default:
      return assertNever(event);
  }
}
