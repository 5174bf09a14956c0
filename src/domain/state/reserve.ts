import { refuseOverQuota } from './quota-checks';
import {
  AddressGlob,
  formatAddressGlob,
  parseAddressGlob,
  ReservationMode,
} from '../reservations/address-glob';
import { GlobIndex } from '../reservations/glob-index';
import { DomainError } from '../shared/domain-error';
import { parseInstanceAddress } from '../terraform/instance-address';
import { conflictsWith, Holder, leaseEnd, NAMED_GLOBS, reclaim, reservationsOf } from './holders';
import { AcquireReservations, ReleaseReservations, RenewReservations } from './state.commands';
import {
  APPLY_ALREADY_STARTED,
  APPLY_INVALID,
  APPLY_NO_VERSION,
  APPLY_STALE,
  RESERVATION_CONFLICT,
  RESERVATION_EXPIRED,
  STATE_NOT_FOUND,
} from './state.errors';
import { StateEvent } from './state.events';
import { ActiveState, StateAggregate } from './state.model';

/** A lease shorter than a heartbeat round trip, or longer than a day, is a mistake. */
export const MIN_LEASE_SECONDS = 5;
export const MAX_LEASE_SECONDS = 24 * 60 * 60;
export const DEFAULT_LEASE_SECONDS = 15 * 60;

function active(state: StateAggregate, name: string): ActiveState {
  if (state.status !== 'active') {
    throw new DomainError(STATE_NOT_FOUND, `state ${name} does not exist`);
  }
  return state;
}

function checkLease(seconds: number): void {
  if (
    !Number.isSafeInteger(seconds) ||
    seconds < MIN_LEASE_SECONDS ||
    seconds > MAX_LEASE_SECONDS
  ) {
    throw new DomainError(
      APPLY_INVALID,
      `a lease must be ${MIN_LEASE_SECONDS} to ${MAX_LEASE_SECONDS} seconds, got ${seconds}`,
    );
  }
}

/** "module.web.* (write) held by alice, run 4f2a…" */
function describe(holder: Holder): string {
  const who = holder.actor ?? 'someone';
  return holder.runId !== null
    ? `${holder.glob} (${holder.mode}) held by ${who}, run ${holder.runId}`
    : `the terraform ${holder.kind === 'terraform-plan' ? 'plan ' : ''}lock ${holder.lockId} held by ${who}`;
}

export function conflictError(name: string, holders: Holder[]): DomainError {
  return new DomainError(
    RESERVATION_CONFLICT,
    `state ${name}: ${holders.slice(0, NAMED_GLOBS).map(describe).join('; ')}` +
      (holders.length > NAMED_GLOBS ? ` and ${holders.length - NAMED_GLOBS} more` : ''),
    { holders },
  );
}

/** An address that changed after the base version, and the version that changed it. */
export interface StaleAddress {
  address: string;
  changedInVersion: number;
}

/**
 * The addresses, among those `globs` cover, that a version after `base`
 * changed (opened, replaced or removed). Only the addresses changed since
 * are looked at: usually few, however large the state; the globs are
 * indexed only when there is one, so each costs its steps, not one
 * comparison per glob of the plan.
 */
export function changedSince(
  state: ActiveState,
  base: number,
  globs: AddressGlob[],
): StaleAddress[] {
  const stale: StaleAddress[] = [];
  let planned: GlobIndex<true> | null = null;
  for (const [address, version] of state.changedIn) {
    if (version <= base) continue;
    if (planned === null) {
      planned = new GlobIndex<true>();
      for (const g of globs) planned.add(g, true);
    }
    if (planned.covers(parseInstanceAddress(address))) {
      stale.push({ address, changedInVersion: version });
    }
  }
  return stale;
}

export function staleError(name: string, base: number, stale: StaleAddress[]): DomainError {
  const shown = stale
    .slice(0, 5)
    .map((s) => `${s.address} (version ${s.changedInVersion})`)
    .join(', ');
  const more = stale.length > 5 ? ` and ${stale.length - 5} more` : '';
  return new DomainError(
    APPLY_STALE,
    `state ${name} changed after version ${base} at ${shown}${more}: re-plan`,
    { addresses: stale },
  );
}

function checkBase(name: string, state: ActiveState, base: number): void {
  if (state.version === 0) {
    throw new DomainError(
      APPLY_NO_VERSION,
      `state ${name} has no version yet: write its first version with terraform`,
    );
  }
  if (!Number.isSafeInteger(base) || base < 1 || base > state.version) {
    throw new DomainError(
      APPLY_INVALID,
      `base version ${base} is not a version of state ${name} (1 to ${state.version})`,
    );
  }
}

/** A requested glob: its steps, and its one spelling. */
interface ReadGlob {
  glob: AddressGlob;
  text: string;
}

/**
 * Requests' globs read before the decision (readGlobsAhead), by the
 * requests array the command carries; freed with the command.
 */
const readAhead = new WeakMap<readonly { glob: string }[], ReadGlob[]>();

/**
 * Reads `requests[from, to)` for the AcquireReservations that will carry
 * this very array: reading 10,000 globs is most of that decision, and the
 * application runs this a piece per turn of the event loop before it, so
 * that the decision itself, one turn, only looks them up. The decision is
 * the same with or without it. False at a text that is not a glob: the
 * decision refuses it, after the checks that come first.
 */
export function readGlobsAhead(
  requests: readonly { glob: string }[],
  from: number,
  to: number,
): boolean {
  let read = readAhead.get(requests);
  if (read === undefined) {
    read = [];
    readAhead.set(requests, read);
  }
  for (let i = from; i < to; i++) {
    const glob = parsedOrNull(requests[i].glob);
    if (glob === null) return false;
    read[i] = { glob, text: formatAddressGlob(glob) };
  }
  return true;
}

function parsedOrNull(text: string): AddressGlob | null {
  try {
    return parseAddressGlob(text);
  } catch (err) {
    if (err instanceof DomainError) return null;
    throw err;
  }
}

/**
 * All or nothing: every requested glob is granted, or none is. Refused
 * while anyone live holds a conflicting reservation or terraform lock
 * (all of them are named), or when the plan is stale. Runs whose lease ran
 * out are reclaimed on the way.
 */
export function acquireReservations(
  command: AcquireReservations,
  state: StateAggregate,
): StateEvent[] {
  const d = command.data;
  const { now, actor } = command.metadata;
  const s = active(state, d.name);
  checkBase(d.name, s, d.baseVersion);
  checkLease(d.leaseSeconds);
  if (d.requests.length === 0) throw new DomainError(APPLY_INVALID, 'no reservations asked for');
  if (d.reservationIds.length !== d.requests.length) {
    throw new Error('one reservation id per request');
  }
  // One spelling per glob; the same glob and mode twice is asked once.
  const wanted: { id: string; text: string; glob: AddressGlob; mode: ReservationMode }[] = [];
  const asked: Record<ReservationMode, Set<string>> = { read: new Set(), write: new Set() };
  // Each text parsed once: the write and read sets usually repeat the requests.
  const parsed = new Map<string, AddressGlob>();
  const ahead = readAhead.get(d.requests);
  d.requests.forEach((r, i) => {
    let read = ahead?.[i];
    if (read === undefined) {
      const glob = parsed.get(r.glob) ?? parseAddressGlob(r.glob);
      read = { glob, text: formatAddressGlob(glob) };
    }
    parsed.set(r.glob, read.glob);
    const same = asked[r.mode];
    if (same.has(read.text)) return;
    same.add(read.text);
    wanted.push({ id: d.reservationIds[i], text: read.text, glob: read.glob, mode: r.mode });
  });

  const held = reservationsOf(s, d.runId);
  if (held.length > 0) {
    const same = held.length === wanted.length && held.every((h) => asked[h.mode].has(h.glob));
    if (same) return []; // a retry: the run holds exactly these
    throw new DomainError(
      APPLY_ALREADY_STARTED,
      `run ${d.runId} already holds other reservations on state ${d.name}`,
    );
  }

  const { live, expired } = conflictsWith(s, wanted, { runId: d.runId }, now);
  if (live.length > 0) throw conflictError(d.name, live);
  if (wanted.some((w) => w.mode === 'write')) {
    refuseOverQuota(s, d.quota, { operation: 'kl apply', now });
  }

  const planned = [...d.writeSet, ...d.readSet].map((t) => parsed.get(t) ?? parseAddressGlob(t));
  const stale = changedSince(s, d.baseVersion, planned);
  if (stale.length > 0) throw staleError(d.name, d.baseVersion, stale);

  const expiresAt = leaseEnd(now, d.leaseSeconds);
  return [
    ...reclaim(s, expired, d.runId),
    // The run's info once, on its first reservation: a run may reserve thousands of globs.
    ...wanted.map((w, i): StateEvent => ({
      type: 'ReservationAcquired',
      data: {
        stateId: s.stateId,
        reservationId: w.id,
        runId: d.runId,
        glob: w.text,
        mode: w.mode,
        holder: actor,
        ...(i === 0 ? { info: d.info } : {}),
        acquiredAt: now,
        expiresAt,
      },
    })),
  ];
}

export function expiredError(name: string, runId: string): DomainError {
  return new DomainError(
    RESERVATION_EXPIRED,
    `run ${runId} holds no reservations on state ${name}: they were released, or reclaimed ` +
      'after its lease ran out',
    { runId },
  );
}

/**
 * The heartbeat. A lease that ran out but that nobody reclaimed is renewed
 * too: nothing conflicting was granted meanwhile (that would have reclaimed it).
 */
export function renewReservations(command: RenewReservations, state: StateAggregate): StateEvent[] {
  const d = command.data;
  const s = active(state, d.name);
  checkLease(d.leaseSeconds);
  const held = reservationsOf(s, d.runId);
  if (held.length === 0) throw expiredError(d.name, d.runId);
  return [
    {
      type: 'ReservationRenewed',
      data: {
        stateId: s.stateId,
        runId: d.runId,
        reservationIds: held.map((r) => r.id),
        expiresAt: leaseEnd(command.metadata.now, d.leaseSeconds),
      },
    },
  ];
}

/** Releasing what a run no longer holds is done already. */
export function releaseReservations(
  command: ReleaseReservations,
  state: StateAggregate,
): StateEvent[] {
  const d = command.data;
  const s = active(state, d.name);
  const held = reservationsOf(s, d.runId);
  if (held.length === 0) return [];
  return [
    {
      type: 'ReservationReleased',
      data: {
        stateId: s.stateId,
        runId: d.runId,
        reservationIds: held.map((r) => r.id),
        reason: d.reason,
      },
    },
  ];
}
