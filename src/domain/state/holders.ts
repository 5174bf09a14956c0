import {
  ALL_ADDRESSES,
  AddressGlob,
  globCovers,
  parseAddressGlob,
  ReservationMode,
  reservationsConflict,
} from '../reservations/address-glob';
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

/** The run's reservations, in the order they were acquired. */
export function reservationsOf(state: ActiveState, runId: string): Reservation[] {
  return [...state.reservations.values()].filter((r) => r.runId === runId);
}

/** Reservations grouped by run, in the order the runs acquired them. */
export function runs(state: ActiveState): Map<string, Reservation[]> {
  const byRun = new Map<string, Reservation[]>();
  for (const r of state.reservations.values()) {
    const list = byRun.get(r.runId);
    if (list) list.push(r);
    else byRun.set(r.runId, [r]);
  }
  return byRun;
}

/** How many of a run's globs a LockInfo or a conflict message names; the rest are counted. */
export const NAMED_GLOBS = 5;

/**
 * A LockInfo naming an apply run, for terraform to print when the run holds
 * what it asked for: the ID is the run's, Who its actor, Info its globs.
 */
export function runLockInfo(reservations: Reservation[]): LockInfo {
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
  expired: Map<string, Reservation[]>;
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
  const live: Holder[] = [];
  for (const lock of state.locks.values()) {
    if (lock.info.ID === asker.lockId) continue;
    const held = { glob: ALL_ADDRESSES, mode: lock.mode };
    if (wanted.some((w) => reservationsConflict(w, held))) {
      live.push(lockHolder(lock, lockAcquiredAt(lock)));
    }
  }
  return withRuns(state, asker, now, live, (r) => {
    const held = { glob: parseAddressGlob(r.glob), mode: r.mode };
    return wanted.some((w) => reservationsConflict(w, held));
  });
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
  return withRuns(state, asker, now, live, (r) => {
    const glob = parseAddressGlob(r.glob);
    return addresses.some((a) => globCovers(glob, a.parsed));
  });
}

/**
 * `live` with the other runs' reservations that `hits` picks, and the runs
 * among them whose lease ran out, to reclaim.
 */
function withRuns(
  state: ActiveState,
  asker: Asker,
  now: string,
  live: Holder[],
  hits: (r: Reservation) => boolean,
): Conflicts {
  const expired = new Map<string, Reservation[]>();
  for (const [runId, reservations] of runs(state)) {
    if (runId === asker.runId) continue;
    const hit = reservations.filter(hits);
    if (hit.length === 0) continue;
    if (isExpired(reservations[0], now)) expired.set(runId, reservations);
    else {
      // One LockInfo per run, shared by its holders: built per holder, a run of
      // n globs cost n² (and ran kld out of memory at 20,000).
      const lockInfo = runLockInfo(reservations);
      live.push(...hit.map((r) => reservationHolder(r, lockInfo)));
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
  expired: Map<string, Reservation[]>,
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
  reservations: Reservation[],
  addresses: { text: string; parsed: InstanceAddress }[],
): string[] {
  const writes = reservations
    .filter((r) => r.mode === 'write')
    .map((r) => parseAddressGlob(r.glob));
  return addresses.filter((a) => !writes.some((g) => globCovers(g, a.parsed))).map((a) => a.text);
}
