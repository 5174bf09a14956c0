import {
  ALL_ADDRESSES,
  AddressGlob,
  globCovers,
  parseAddressGlob,
  ReservationMode,
  reservationsConflict,
} from '../../src/domain/reservations/address-glob';
import {
  Asker,
  Conflicts,
  Holder,
  isExpired,
  lockHolder,
  runLockInfo,
} from '../../src/domain/state/holders';
import { StaleAddress } from '../../src/domain/state/reserve';
import { ActiveState, HeldLock, Reservation } from '../../src/domain/state/state.model';
import { InstanceAddress, parseInstanceAddress } from '../../src/domain/terraform/instance-address';

/**
 * The conflict checks as they were before the glob index (wave 18): every
 * wanted glob or written address against every reservation held, each held
 * glob parsed again per check. The oracle of the holders property test and
 * the peer of bench:reservations.
 */
export function pairwiseConflicts(
  state: ActiveState,
  wanted: { glob: AddressGlob; mode: ReservationMode }[],
  asker: Asker,
  now: string,
): Conflicts {
  return pairwise(
    state,
    asker,
    now,
    (lock) => wanted.some((w) => reservationsConflict(w, { glob: ALL_ADDRESSES, mode: lock.mode })),
    (r) => {
      const held = { glob: parseAddressGlob(r.glob), mode: r.mode };
      return wanted.some((w) => reservationsConflict(w, held));
    },
  );
}

export function pairwiseCovering(
  state: ActiveState,
  addresses: { parsed: InstanceAddress }[],
  asker: Asker,
  now: string,
): Conflicts {
  return pairwise(
    state,
    asker,
    now,
    () => true,
    (r) => {
      const glob = parseAddressGlob(r.glob);
      return addresses.some((a) => globCovers(glob, a.parsed));
    },
  );
}

export function pairwiseUncovered(
  state: ActiveState,
  runId: string,
  addresses: { text: string; parsed: InstanceAddress }[],
): string[] {
  const writes = [...state.reservations.values()]
    .filter((r) => r.runId === runId && r.mode === 'write')
    .map((r) => parseAddressGlob(r.glob));
  return addresses.filter((a) => !writes.some((g) => globCovers(g, a.parsed))).map((a) => a.text);
}

export function pairwiseChangedSince(
  state: ActiveState,
  base: number,
  globs: AddressGlob[],
): StaleAddress[] {
  const stale: StaleAddress[] = [];
  for (const [address, version] of state.changedIn) {
    if (version <= base) continue;
    const parsed = parseInstanceAddress(address);
    if (globs.some((g) => globCovers(g, parsed)))
      stale.push({ address, changedInVersion: version });
  }
  return stale;
}

function pairwise(
  state: ActiveState,
  asker: Asker,
  now: string,
  lockHit: (lock: HeldLock) => boolean,
  hits: (r: Reservation) => boolean,
): Conflicts {
  const live: Holder[] = [...state.locks.values()]
    .filter((l) => l.info.ID !== asker.lockId && lockHit(l))
    .map((l) =>
      lockHolder(l, l.acquiredAt ?? (typeof l.info.Created === 'string' ? l.info.Created : null)),
    );
  const byRun = new Map<string, Reservation[]>();
  for (const r of state.reservations.values()) {
    const list = byRun.get(r.runId);
    if (list) list.push(r);
    else byRun.set(r.runId, [r]);
  }
  const expired = new Map<string, readonly Reservation[]>();
  for (const [runId, reservations] of byRun) {
    if (runId === asker.runId) continue;
    const hit = reservations.filter(hits);
    if (hit.length === 0) continue;
    if (isExpired(reservations[0], now)) expired.set(runId, reservations);
    else {
      const lockInfo = runLockInfo(reservations);
      live.push(
        ...hit.map((r): Holder => ({
          kind: 'apply',
          glob: r.glob,
          mode: r.mode,
          actor: r.holder,
          runId: r.runId,
          lockId: null,
          acquiredAt: r.acquiredAt,
          expiresAt: r.expiresAt,
          lockInfo,
        })),
      );
    }
  }
  return { live, expired };
}
