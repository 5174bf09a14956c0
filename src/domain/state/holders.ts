import { AddressGlob, parseAddressGlob, ReservationMode } from '../reservations/address-glob';
import { GlobIndex } from '../reservations/glob-index';
import { InstanceAddress } from '../terraform/instance-address';
import { LockInfo } from './lock-info';
import { ReservationExpired } from './state.events';
import { ActiveState, HeldLock, Reservation } from './state.model';

/**
 * Who holds what on a state: terraform locks (a `*` write reservation, or
 * a `*` read for a plan) and apply runs' reservations, seen the same way so
 * one conflict matrix decides between them.
 */
export type HolderKind = 'apply' | 'terraform-lock' | 'terraform-plan';

export interface Holder {
  kind: HolderKind;
  glob: string;
  mode: ReservationMode;
  actor: string | null;
  /** The apply run; null for a terraform lock. */
  runId: string | null;
  /** The terraform lock's ID; null for a run. */
  lockId: string | null;
  acquiredAt: string | null;
  /** A run's lease; null for a terraform lock (it lasts until unlocked). */
  expiresAt: string | null;
  /** What terraform reads in a 423: the lock's own, or one naming the run. */
  lockInfo: LockInfo;
}

export const PLAN_OPERATION = 'OperationTypePlan';
/** LockInfo.Operation of `terraform apply` (and of `terraform destroy`, an apply too). */
export const APPLY_OPERATION = 'OperationTypeApply';

/** A plan only reads the state: its lock is shared with other plans. */
export function lockMode(info: LockInfo): ReservationMode {
  return info.Operation === PLAN_OPERATION ? 'read' : 'write';
}

/** `now` and lease ends are ISO-8601 instants from command metadata and events. */
export function isExpired(r: Pick<Reservation, 'expiresAt'>, now: string): boolean {
  return Date.parse(r.expiresAt) <= Date.parse(now);
}

export function leaseEnd(now: string, seconds: number): string {
  return new Date(Date.parse(now) + seconds * 1000).toISOString();
}

/**
 * A state's reservations grouped by run, and indexed by glob for the
 * conflict checks (GlobIndex), so that a check costs what the request names
 * plus what it meets, not one comparison per reservation held.
 *
 * Kept per reservations map. Evolve never deletes or changes a reservation
 * in a map a state holds; at most it adds the later reservations of a run's
 * append in place to the map the run's first one made (as lifecycle events
 * fill their commit's maps). So a map of the same size holds what it held
 * when this was built. A WeakMap frees it with the state.
 */
class HeldReservations {
  /** Reservations by run, runs in the order they acquired, each run's in acquisition order. */
  readonly byRun = new Map<string, Reservation[]>();
  /** The map's size when this was built (see above). */
  readonly size: number;
  /** The indexes once they hold every reservation of the map. */
  current: GlobIndexes | null = null;

  constructor(
    private readonly reservations: Map<string, Reservation>,
    /** The indexes of the map this one was made from (derivedFrom), to bring up to date. */
    readonly shared: GlobIndexes | undefined,
  ) {
    this.size = reservations.size;
    for (const r of reservations.values()) {
      const list = this.byRun.get(r.runId);
      if (list) list.push(r);
      else this.byRun.set(r.runId, [r]);
    }
  }

  /** Every run's reservations of one mode, by id; ids of other maps among them (see GlobIndexes). */
  index(mode: ReservationMode): GlobIndex<string> {
    // Never pauses: one step brings them up to date.
    if (this.current === null) this.updating(Infinity).next();
    return mode === 'write' ? this.current!.writes : this.current!.reads;
  }

  /** One run's write reservations: what its commits may change. */
  writesOf(runId: string): GlobIndex<true> {
    if (this.current === null) this.updating(Infinity).next();
    return this.current!.writesOf(runId, this.byRun.get(runId) ?? []);
  }

  /**
   * Brings the indexes this map was made from up to date with it, pausing
   * after every `per` reservations added: after a run started beside
   * 10,000 reservations, only its own are added. Indexes that hold more
   * than twice as many others as this map holds, or that indexed one of
   * its ids as another glob (only a damaged history reuses one), are left
   * for new ones.
   */
  *updating(per: number): Generator<void> {
    if (this.current !== null) return;
    let target =
      this.shared !== undefined && this.shared.size <= 2 * this.size + STALE_SLACK
        ? this.shared
        : new GlobIndexes();
    if (!(yield* target.update(this.reservations.values(), per))) {
      target = new GlobIndexes();
      yield* target.update(this.reservations.values(), per);
    }
    // Brought up to date meanwhile by a check that could not wait: that one stands.
    this.current ??= target;
  }
}

/** Reservations of other maps an index may hold beyond twice a map's own. */
const STALE_SLACK = 1000;

/**
 * Glob indexes shared along a state's history: each map made from another
 * (derivedFrom) adds to its predecessor's indexes the reservations that are
 * new to them, instead of indexing all it holds again (a run of 10,000
 * globs indexed cost 30–60 ms, again after every heartbeat, start and
 * release beside it). They hold ids, and every id they ever held with its
 * glob and mode, which never change: so they answer for every map that
 * brought them up to date, once the ids a map does not hold are left out
 * of an answer (withRuns).
 */
class GlobIndexes {
  readonly writes = new GlobIndex<string>();
  readonly reads = new GlobIndex<string>();
  /** Every id indexed, as what it was indexed. */
  private readonly indexed = new Map<string, Pick<Reservation, 'glob' | 'mode'>>();
  private readonly runWrites = new Map<
    string,
    { index: GlobIndex<true>; ids: readonly string[] }
  >();

  get size(): number {
    return this.indexed.size;
  }

  /** Adds the reservations not indexed yet; false at an id indexed as another glob or mode. */
  *update(reservations: Iterable<Reservation>, per: number): Generator<void, boolean> {
    let added = 0;
    for (const r of reservations) {
      const known = this.indexed.get(r.id);
      if (known !== undefined) {
        if (known.glob !== r.glob || known.mode !== r.mode) return false;
        continue;
      }
      this.indexed.set(r.id, { glob: r.glob, mode: r.mode });
      (r.mode === 'write' ? this.writes : this.reads).add(globOf(r), r.id);
      if (++added % per === 0) yield;
    }
    return true;
  }

  writesOf(runId: string, reservations: readonly Reservation[]): GlobIndex<true> {
    const kept = this.runWrites.get(runId);
    if (
      kept !== undefined &&
      kept.ids.length === reservations.length &&
      reservations.every((r, i) => kept.ids[i] === r.id)
    ) {
      return kept.index;
    }
    const index = new GlobIndex<true>();
    for (const r of reservations) if (r.mode === 'write') index.add(globOf(r), true);
    this.runWrites.set(runId, { index, ids: reservations.map((r) => r.id) });
    return index;
  }
}

const heldByMap = new WeakMap<Map<string, Reservation>, HeldReservations>();

/** The indexes a map was made from, noted by derivedFrom until a check brings them up to date. */
const derivedByMap = new WeakMap<Map<string, Reservation>, GlobIndexes>();

function indexesOf(reservations: Map<string, Reservation>): GlobIndexes | undefined {
  const h = heldByMap.get(reservations);
  return h?.current ?? h?.shared ?? derivedByMap.get(reservations);
}

/**
 * `next` was made from `previous` (evolve: a run's reservations added, its
 * leases renewed, its reservations released): its checks bring
 * `previous`'s glob indexes up to date instead of building new ones. Only
 * noted here; the event's evolve does no more than before.
 */
export function derivedFrom(
  next: Map<string, Reservation>,
  previous: Map<string, Reservation>,
): void {
  const indexes = indexesOf(previous);
  if (indexes !== undefined) derivedByMap.set(next, indexes);
}

/**
 * Reservations' globs, parsed once per run: kept by the run's info object,
 * which all its reservations share and which later states keep, a renewal
 * included (its new reservation objects carry the same info). So an index
 * built again after another run started, or after a heartbeat, parses no
 * glob it parsed before. A WeakMap frees them with the run.
 */
const parsedGlobs = new WeakMap<object, Map<string, AddressGlob>>();

function globOf(r: Reservation): AddressGlob {
  let parsed = parsedGlobs.get(r.info);
  if (parsed === undefined) {
    parsed = new Map();
    parsedGlobs.set(r.info, parsed);
  }
  let glob = parsed.get(r.glob);
  if (glob === undefined) {
    glob = parseAddressGlob(r.glob);
    parsed.set(r.glob, glob);
  }
  return glob;
}

function held(state: ActiveState): HeldReservations {
  let h = heldByMap.get(state.reservations);
  if (h === undefined || h.size !== state.reservations.size) {
    h = new HeldReservations(state.reservations, indexesOf(state.reservations));
    heldByMap.set(state.reservations, h);
  }
  return h;
}

/**
 * The state's glob indexes brought up to date `per` reservations a piece,
 * for the application to run a piece per turn of the event loop before a
 * decision on this state: the decision, one turn, then finds them ready (a
 * state loaded cold indexes all it holds). Nothing else changes: a check
 * on the state that comes first brings them up to date itself, as always.
 */
export function indexInPieces(state: ActiveState, per: number): Iterable<void> {
  return held(state).updating(per);
}

/** The run's reservations, in the order they were acquired. */
export function reservationsOf(state: ActiveState, runId: string): readonly Reservation[] {
  return held(state).byRun.get(runId) ?? [];
}

/** Reservations grouped by run, in the order the runs acquired them. */
export function runs(state: ActiveState): ReadonlyMap<string, readonly Reservation[]> {
  return held(state).byRun;
}

/** How many of a run's globs a LockInfo or a conflict message names; the rest are counted. */
export const NAMED_GLOBS = 5;

/**
 * A LockInfo naming an apply run, for terraform to print when the run holds
 * what it asked for: the ID is the run's, Who its actor, Info its globs.
 */
export function runLockInfo(reservations: readonly Reservation[]): LockInfo {
  const [first] = reservations;
  // The first few globs: a run may hold thousands, and terraform prints this whole.
  const shown = reservations.slice(0, NAMED_GLOBS).map((r) => `${r.mode} ${r.glob}`);
  const more = reservations.length - shown.length;
  const globs = shown.join(', ') + (more > 0 ? ` and ${more} more` : '');
  // A state-engine write names itself (ADR 0029 D5): "state-engine: state mv".
  const engineOp = first.info.state_engine_operation;
  const operation = typeof engineOp === 'string' ? `state-engine: ${engineOp}` : 'kl apply';
  return {
    ID: first.runId,
    Operation: operation,
    Info:
      `${operation} run ${first.runId} holds ${globs} until ${first.expiresAt} ` +
      `(released when it ends; an operator can run: kl apply abort ${first.runId})`,
    Who: first.holder,
    Version: '',
    Created: first.acquiredAt,
    Path: '',
  };
}

export function lockHolder(lock: HeldLock, acquiredAt: string | null): Holder {
  return {
    kind: lock.mode === 'read' ? 'terraform-plan' : 'terraform-lock',
    glob: '*',
    mode: lock.mode,
    actor: typeof lock.info.Who === 'string' ? lock.info.Who : null,
    runId: null,
    lockId: lock.info.ID,
    acquiredAt,
    expiresAt: null,
    lockInfo: lock.info,
  };
}

function reservationHolder(r: Reservation, lockInfo: LockInfo): Holder {
  return {
    kind: 'apply',
    glob: r.glob,
    mode: r.mode,
    actor: r.holder,
    runId: r.runId,
    lockId: null,
    acquiredAt: r.acquiredAt,
    expiresAt: r.expiresAt,
    lockInfo,
  };
}

/** Who is asking: an apply run, a terraform lock, or neither. Their own holdings never conflict. */
export interface Asker {
  runId?: string;
  lockId?: string;
}

/** What a request meets: live holders it conflicts with, and expired runs it reclaims. */
export interface Conflicts {
  live: Holder[];
  /** Runs whose lease ran out and which hold something the request needs. */
  expired: Map<string, readonly Reservation[]>;
}

/**
 * What stands in the way of `wanted` (each glob with its mode): terraform
 * locks (always `*`) and other runs' reservations that conflict. A run
 * whose lease ran out is not in the way; it is reclaimed instead.
 */
export function conflictsWith(
  state: ActiveState,
  wanted: { glob: AddressGlob; mode: ReservationMode }[],
  asker: Asker,
  now: string,
): Conflicts {
  // A lock holds `*`, which every glob meets: the modes alone decide.
  const writes = wanted.filter((w) => w.mode === 'write').map((w) => w.glob);
  const live: Holder[] = [];
  for (const lock of state.locks.values()) {
    if (lock.info.ID === asker.lockId) continue;
    if (writes.length > 0 || (lock.mode === 'write' && wanted.length > 0)) {
      live.push(lockHolder(lock, lockAcquiredAt(lock)));
    }
  }
  if (state.reservations.size === 0) return { live, expired: new Map() };
  // Readers meet only writers; a writer meets both.
  const h = held(state);
  const hits = h.index('write').meeting(wanted.map((w) => w.glob));
  for (const r of h.index('read').meeting(writes)) hits.add(r);
  return withRuns(state, asker, now, live, hits);
}

/**
 * Like conflictsWith, for a write of these addresses: live holders (other
 * than the writer) whose reservations cover one of them, and expired runs
 * to reclaim. A terraform lock covers everything.
 */
export function coveringHolders(
  state: ActiveState,
  addresses: { parsed: InstanceAddress }[],
  asker: Asker,
  now: string,
): Conflicts {
  const live: Holder[] = [];
  for (const lock of state.locks.values()) {
    if (lock.info.ID !== asker.lockId) live.push(lockHolder(lock, lockAcquiredAt(lock)));
  }
  if (state.reservations.size === 0) return { live, expired: new Map() };
  const h = held(state);
  const parsed = addresses.map((a) => a.parsed);
  const hits = h.index('write').covering(parsed);
  for (const r of h.index('read').covering(parsed)) hits.add(r);
  return withRuns(state, asker, now, live, hits);
}

/**
 * `live` with the other runs' reservations among `hits`, and the runs
 * among them whose lease ran out, to reclaim. Holders keep the order of
 * the reservations: runs in the order they acquired, then each run's own.
 */
function withRuns(
  state: ActiveState,
  asker: Asker,
  now: string,
  live: Holder[],
  hits: Set<string>,
): Conflicts {
  const expired = new Map<string, readonly Reservation[]>();
  if (hits.size === 0) return { live, expired };
  const hitRuns = new Set<string>();
  for (const id of hits) {
    // The indexes may hold reservations of other maps along the state's history.
    const runId = state.reservations.get(id)?.runId;
    if (runId !== undefined && runId !== asker.runId) hitRuns.add(runId);
  }
  for (const [runId, reservations] of held(state).byRun) {
    if (!hitRuns.has(runId)) continue;
    if (isExpired(reservations[0], now)) expired.set(runId, reservations);
    else {
      // One LockInfo per run, shared by its holders: built per holder, a run of
      // n globs cost n² (and ran kld out of memory at 20,000).
      const lockInfo = runLockInfo(reservations);
      for (const r of reservations) if (hits.has(r.id)) live.push(reservationHolder(r, lockInfo));
    }
  }
  return { live, expired };
}

function lockAcquiredAt(lock: HeldLock): string | null {
  return lock.acquiredAt ?? (typeof lock.info.Created === 'string' ? lock.info.Created : null);
}

/** The events that reclaim expired runs for `reclaimedBy`. */
export function reclaim(
  state: ActiveState,
  expired: Map<string, readonly Reservation[]>,
  reclaimedBy: string,
): ReservationExpired[] {
  return [...expired].map(([runId, reservations]) => ({
    type: 'ReservationExpired',
    data: {
      stateId: state.stateId,
      runId,
      reservationIds: reservations.map((r) => r.id),
      expiresAt: reservations[0].expiresAt,
      reclaimedBy,
    },
  }));
}

/** Addresses none of the run's write reservations cover. */
export function uncovered(
  state: ActiveState,
  runId: string,
  addresses: { text: string; parsed: InstanceAddress }[],
): string[] {
  const writes = held(state).writesOf(runId);
  return addresses.filter((a) => !writes.covers(a.parsed)).map((a) => a.text);
}
