import { DomainError } from '../shared/domain-error';
import { jsonListPieces, mapped, PIECE_ENTRIES } from '../shared/json-list-pieces';
import { LayeredMap } from '../shared/layered-map';
import { isJsonObject, JsonObject, JsonValue } from '../terraform/json-value';
import { OutputV4 } from '../terraform/state-document';
import { storedLockInfo } from './lock-info';
import { CommitSource } from './state.commands';
import {
  CommitHead,
  CommitMeta,
  HeldLock,
  Reservation,
  ResourceEntry,
  StateAggregate,
} from './state.model';

/**
 * Bump when the snapshot shape changes; older snapshots are then ignored and
 * the stream replayed. Not bumped for `runInfo` (a run's info once, not on
 * each reservation): this loader reads snapshots of either shape, and an
 * older kld refuses one of the new shape holding reservations (their `info`
 * is missing) and replays the stream instead.
 */
export const STATE_SNAPSHOT_SCHEMA = 'state/3';

/** A reservation as a snapshot stores it: its run's info is in `runInfo`. */
export type SnapshotReservation = Omit<Reservation, 'info'>;

export type StateSnapshot =
  | { status: 'missing' }
  | {
      status: 'active';
      stateId: string;
      name: string;
      locks: HeldLock[];
      reservations: SnapshotReservation[];
      /** [runId, info] of each run holding reservations (absent in older snapshots). */
      runInfo: [string, JsonObject][];
      version: number;
      serial: number | null;
      lineage: string | null;
      /** [address, hash] pairs, in the aggregate's order. */
      instances: [string, string][];
      /** [name, hash] pairs of the current outputs. */
      outputs: [string, string][];
      /** [address, version] pairs. */
      changedIn: [string, number][];
      /** [resource address, fields, instance count] triples. */
      resources: [string, string, number][];
      meta: CommitMeta | null;
      head: CommitHead | null;
    }
  | { status: 'deleted'; stateId: string; name: string };

export function toSnapshot(state: StateAggregate): StateSnapshot {
  switch (state.status) {
    case 'missing':
      return { status: 'missing' };
    case 'deleted':
      return { status: 'deleted', stateId: state.stateId, name: state.name };
    case 'active':
      return {
        status: 'active',
        stateId: state.stateId,
        name: state.name,
        locks: [...state.locks.values()],
        reservations: [...state.reservations.values()].map(({ info: _, ...r }) => r),
        runInfo: [...state.runInfo],
        version: state.version,
        serial: state.serial,
        lineage: state.lineage,
        instances: [...state.instances],
        outputs: [...state.outputs],
        changedIn: [...state.changedIn],
        resources: [...state.resources].map(([a, e]) => [a, e.fields, e.instances]),
        meta: state.meta,
        head: state.head,
      };
    default: {
      const never: never = state;
      throw new Error(`unexpected state ${JSON.stringify(never)}`);
    }
  }
}

/**
 * The snapshot's JSON text, exactly `JSON.stringify(toSnapshot(state))`, in
 * pieces: each long list (addresses, reservations, outputs…) a thousand
 * entries at a time, read from the state as the pieces are asked for. A
 * writer can then let other work run between pieces: the text of a
 * 20,000-instance state takes tens of milliseconds to build in one go. The
 * state must not change meanwhile; evolve never changes a state it returned.
 */
export function* toSnapshotText(state: StateAggregate): Generator<string> {
  if (state.status !== 'active') {
    yield JSON.stringify(toSnapshot(state));
    return;
  }
  const j = JSON.stringify;
  yield (
    `{"status":"active","stateId":${j(state.stateId)},"name":${j(state.name)}` +
    `,"locks":${j([...state.locks.values()])},"reservations":`
  );
  yield* jsonListPieces(mapped(state.reservations.values(), ({ info: _, ...r }) => r));
  yield ',"runInfo":';
  yield* jsonListPieces(state.runInfo);
  yield (
    `,"version":${j(state.version)},"serial":${j(state.serial)}` +
    `,"lineage":${j(state.lineage)},"instances":`
  );
  yield* jsonListPieces(state.instances);
  yield ',"outputs":';
  yield* jsonListPieces(state.outputs);
  yield ',"changedIn":';
  yield* jsonListPieces(state.changedIn);
  yield ',"resources":';
  yield* jsonListPieces(mapped(state.resources, ([a, e]) => [a, e.fields, e.instances]));
  yield ',"meta":';
  yield* metaText(state.meta);
  yield `,"head":${j(state.head)}}`;
}

/** The commit's meta, its outputs (as many as the configuration declares) in pieces. */
function* metaText(meta: CommitMeta | null): Generator<string> {
  if (meta === null) {
    yield 'null';
    return;
  }
  let open = '{';
  for (const [key, value] of Object.entries(meta)) {
    if (value === undefined) continue;
    yield `${open}${JSON.stringify(key)}:`;
    open = ',';
    if (key === 'outputs') yield* objectText(Object.entries(value as JsonObject));
    else yield JSON.stringify(value);
  }
  yield open === '{' ? '{}' : '}';
}

/** A JSON object of `members` (those undefined left out, as JSON.stringify does), in pieces. */
function* objectText(members: Iterable<[string, unknown]>): Generator<string> {
  let piece: string[] = [];
  let open = '{';
  for (const [key, value] of members) {
    if (value === undefined) continue;
    piece.push(`${JSON.stringify(key)}:${JSON.stringify(value)}`);
    if (piece.length === PIECE_ENTRIES) {
      yield open + piece.join(',');
      open = ',';
      piece = [];
    }
  }
  yield piece.length > 0 ? `${open}${piece.join(',')}}` : open === '{' ? '{}' : '}';
}

/**
 * Events between two snapshots of this state, at least: a snapshot writes
 * every address, so spacing them by the address count keeps their cost per
 * event constant (a 20,000-instance state is not rewritten every few commits).
 */
export function snapshotSpacing(state: StateAggregate): number {
  return state.status === 'active' ? state.changedIn.size : 0;
}

function bad(what: string): never {
  throw new DomainError('SNAPSHOT.INVALID', `state snapshot: ${what}`);
}

const str = (v: unknown, what: string): string => (typeof v === 'string' ? v : bad(what));
const int = (v: unknown, what: string): number =>
  typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : bad(what);
const obj = (v: unknown, what: string): JsonObject => (isJsonObject(v) ? v : bad(what));
const mode = (v: unknown, what: string): 'read' | 'write' =>
  v === 'read' || v === 'write' ? v : bad(what);
const arr = (v: unknown, what: string): unknown[] => (Array.isArray(v) ? v : bad(what));

function tuple(v: unknown, length: number, what: string): unknown[] {
  const t = arr(v, what);
  return t.length === length ? t : bad(what);
}

function commitHead(json: unknown): CommitHead | null {
  if (json === null) return null;
  const h = obj(json, 'head');
  return {
    checksum: str(h.checksum, 'head checksum'),
    source: str(h.source, 'head source') as CommitSource,
    lockId: h.lockId === null ? null : str(h.lockId, 'head lock id'),
    runId: h.runId === null || h.runId === undefined ? null : str(h.runId, 'head run id'),
  };
}

function commitMeta(json: unknown): CommitMeta | null {
  if (json === null) return null;
  const m = obj(json, 'meta');
  return {
    terraformVersion: str(m.terraformVersion, 'meta terraform version'),
    outputs: obj(m.outputs, 'meta outputs') as Record<string, OutputV4>,
    checkResults: (m.checkResults ?? null) as JsonValue,
    extra: obj(m.extra, 'meta extra'),
  };
}

function heldLock(json: unknown): HeldLock {
  const l = obj(json, 'lock');
  return {
    info: storedLockInfo(l.info),
    mode: mode(l.mode, 'lock mode'),
    acquiredAt: l.acquiredAt === null ? null : str(l.acquiredAt, 'lock acquired at'),
  };
}

/**
 * A reservation, its info shared with the run's other reservations: from
 * `runInfo`, or (a snapshot written before runInfo) its own, the first of
 * the run's read becoming the run's.
 */
function reservation(json: unknown, runInfo: Map<string, JsonObject>): Reservation {
  const r = obj(json, 'reservation');
  const runId = str(r.runId, 'reservation run id');
  let info = runInfo.get(runId);
  if (info === undefined) {
    info = obj(r.info, 'reservation info');
    runInfo.set(runId, info);
  }
  return {
    id: str(r.id, 'reservation id'),
    runId,
    glob: str(r.glob, 'reservation glob'),
    mode: mode(r.mode, 'reservation mode'),
    holder: str(r.holder, 'reservation holder'),
    info,
    acquiredAt: str(r.acquiredAt, 'reservation acquired at'),
    expiresAt: str(r.expiresAt, 'reservation expires at'),
  };
}

function pairs(json: unknown, what: string): Map<string, string> {
  if (!Array.isArray(json)) return bad(`${what}s`);
  const map = new Map<string, string>();
  for (const pair of json) {
    if (!Array.isArray(pair) || pair.length !== 2) return bad(`${what}s`);
    map.set(str(pair[0], `${what} key`), str(pair[1], `${what} hash`));
  }
  return map;
}

export function fromSnapshot(json: unknown): StateAggregate {
  const s = obj(json, 'not an object');
  switch (s.status) {
    case 'missing':
      return { status: 'missing' };
    case 'deleted':
      return {
        status: 'deleted',
        stateId: str(s.stateId, 'stateId'),
        name: str(s.name, 'name'),
      };
    case 'active': {
      const changedIn = LayeredMap.of<string, number>();
      for (const pair of arr(s.changedIn, 'changedIn')) {
        const [address, version] = tuple(pair, 2, 'changedIn');
        changedIn.set(str(address, 'changed address'), int(version, 'changed version'));
      }
      const resources = LayeredMap.of<string, ResourceEntry>();
      for (const triple of arr(s.resources, 'resources')) {
        const [address, fields, count] = tuple(triple, 3, 'resources');
        resources.set(str(address, 'resource address'), {
          fields: str(fields, 'resource fields'),
          instances: int(count, 'resource instances'),
        });
      }
      const locks = new Map<string, HeldLock>();
      for (const l of arr(s.locks, 'locks')) {
        const lock = heldLock(l);
        locks.set(lock.info.ID, lock);
      }
      const runInfo = new Map<string, JsonObject>();
      for (const pair of s.runInfo === undefined ? [] : arr(s.runInfo, 'runInfo')) {
        const [runId, info] = tuple(pair, 2, 'runInfo');
        runInfo.set(str(runId, 'runInfo run id'), obj(info, 'runInfo info'));
      }
      const reservations = new Map<string, Reservation>();
      for (const r of arr(s.reservations, 'reservations')) {
        const res = reservation(r, runInfo);
        reservations.set(res.id, res);
      }
      return {
        status: 'active',
        stateId: str(s.stateId, 'stateId'),
        name: str(s.name, 'name'),
        locks,
        reservations,
        runInfo,
        version: int(s.version, 'version'),
        serial: s.serial === null ? null : int(s.serial, 'serial'),
        lineage: s.lineage === null ? null : str(s.lineage, 'lineage'),
        instances: LayeredMap.of(pairs(s.instances, 'instance')),
        outputs: pairs(s.outputs, 'output'),
        changedIn,
        resources,
        meta: commitMeta(s.meta),
        head: commitHead(s.head),
      };
    }
    default:
      return bad(`unknown status ${JSON.stringify(s.status)}`);
  }
}
