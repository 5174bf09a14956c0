import { pick, randomAddress, randomGlob, rng } from '../../../test/support/random-globs';
import {
  pairwiseChangedSince,
  pairwiseConflicts,
  pairwiseCovering,
  pairwiseUncovered,
} from '../../../test/support/pairwise-holders';
import {
  AddressGlob,
  normalizeAddressGlob,
  parseAddressGlob,
  ReservationMode,
} from '../reservations/address-glob';
import { GlobIndex } from '../reservations/glob-index';
import { LayeredMap } from '../shared/layered-map';
import { parseInstanceAddress } from '../terraform/instance-address';
import { Asker, conflictsWith, coveringHolders, indexInPieces, uncovered } from './holders';
import { changedSince } from './reserve';
import { evolve } from './state.evolve';
import { StateEvent } from './state.events';
import { ActiveState, HeldLock, initialState, Reservation, StateAggregate } from './state.model';
import { fuzzSeeds, seedRange, withSeed } from '../../../test/support/seeded-random';

/** Globs parsed, counted (the module as it is otherwise). */
const mockParsed = { count: 0 };
jest.mock('../reservations/address-glob', () => {
  const actual = jest.requireActual<typeof import('../reservations/address-glob')>(
    '../reservations/address-glob',
  );
  return {
    ...actual,
    parseAddressGlob: (text: string) => {
      mockParsed.count++;
      return actual.parseAddressGlob(text);
    },
  };
});

/**
 * The indexed checks against the pairwise ones they replaced
 * (pairwise-holders), over random states: the same holders in the same
 * order, the same runs reclaimed, the same addresses.
 */
const NOW = '2026-12-01T12:00:00.000Z';
const PAST = '2026-12-01T11:00:00.000Z';
const LATER = '2026-12-01T13:00:00.000Z';
const MODES: ReservationMode[] = ['read', 'write'];

/** A state where run-a holds a write on 50 globs, one per module, until `expiresAt`. */
function runOfFifty(expiresAt: string): { globs: string[]; held: ActiveState } {
  const created = evolve(initialState(), {
    type: 'StateCreated',
    data: { stateId: 's', name: 'prod' },
  });
  const globs = Array.from({ length: 50 }, (_, i) => `module.m${i}.aws_x.a`);
  const held = globs.reduce(
    (state, glob, i) =>
      evolve(state, {
        type: 'ReservationAcquired',
        data: {
          stateId: 's',
          reservationId: `a${i}`,
          runId: 'run-a',
          glob,
          mode: 'write',
          holder: 'alice',
          ...(i === 0 ? { info: { plan: 'p' } } : {}),
          acquiredAt: PAST,
          expiresAt,
        },
      }),
    created,
  ) as ActiveState;
  return { globs, held };
}

function randomState(r: () => number): ActiveState {
  const created = evolve(initialState(), {
    type: 'StateCreated',
    data: { stateId: 's', name: 'prod' },
  }) as ActiveState;
  const reservations = new Map<string, Reservation>();
  const runCount = 1 + Math.floor(r() * 4);
  for (let run = 0; run < runCount; run++) {
    const expiresAt = r() < 0.25 ? PAST : LATER;
    const asked = new Set<string>();
    const count = 1 + Math.floor(r() * 15);
    for (let i = 0; i < count; i++) {
      const glob = normalizeAddressGlob(randomGlob(r));
      const mode = pick(r, MODES);
      if (asked.has(`${mode} ${glob}`)) continue;
      asked.add(`${mode} ${glob}`);
      const id = `r${reservations.size}`;
      reservations.set(id, {
        id,
        runId: `run-${run}`,
        glob,
        mode,
        holder: `actor-${run}`,
        info: {},
        acquiredAt: PAST,
        expiresAt,
      });
    }
  }
  const locks = new Map<string, HeldLock>();
  const lockCount = Math.floor(r() * 3);
  for (let i = 0; i < lockCount; i++) {
    const mode = pick(r, MODES);
    const ID = `lock-${i}`;
    locks.set(ID, {
      info: { ID, Operation: mode === 'read' ? 'OperationTypePlan' : 'OperationTypeApply' },
      mode,
      acquiredAt: PAST,
    });
  }
  return { ...created, reservations, locks };
}

function randomAsker(r: () => number, state: ActiveState): Asker {
  const x = r();
  if (x < 0.4) return { runId: `run-${Math.floor(r() * 4)}` };
  if (x < 0.6 && state.locks.size > 0) return { lockId: pick(r, [...state.locks.keys()]) };
  return {};
}

describe('holders, by index', () => {
  const SEEDS = 300;

  it('conflictsWith names the holders the pairwise matrix names, in its order', () => {
    let named = 0;
    const seeds = fuzzSeeds(seedRange(1, SEEDS));
    for (const seed of seeds) {
      withSeed(seed, () => {
        const r = rng(seed);
        const state = randomState(r);
        const asker = randomAsker(r, state);
        const wanted: { glob: AddressGlob; mode: ReservationMode }[] = Array.from(
          { length: 1 + Math.floor(r() * 6) },
          () => ({ glob: parseAddressGlob(randomGlob(r)), mode: pick(r, MODES) }),
        );
        const expected = pairwiseConflicts(state, wanted, asker, NOW);
        expect({ seed, ...conflictsWith(state, wanted, asker, NOW) }).toEqual({
          seed,
          ...expected,
        });
        named += expected.live.length + expected.expired.size;
      });
    }
    expect(named).toBeGreaterThan(seeds.length);
  });

  it('coveringHolders names the holders covering a written address, as globCovers says', () => {
    let named = 0;
    const seeds = fuzzSeeds(seedRange(1, SEEDS));
    for (const seed of seeds) {
      withSeed(seed, () => {
        const r = rng(seed + SEEDS);
        const state = randomState(r);
        const asker = randomAsker(r, state);
        const addresses = Array.from({ length: 1 + Math.floor(r() * 8) }, () => ({
          parsed: parseInstanceAddress(randomAddress(r)),
        }));
        const expected = pairwiseCovering(state, addresses, asker, NOW);
        expect({ seed, ...coveringHolders(state, addresses, asker, NOW) }).toEqual({
          seed,
          ...expected,
        });
        named += expected.live.length + expected.expired.size;
      });
    }
    expect(named).toBeGreaterThan(seeds.length);
  });

  it("uncovered lists the addresses none of the run's write reservations cover", () => {
    for (const seed of fuzzSeeds(seedRange(1, SEEDS))) {
      withSeed(seed, () => {
        const r = rng(seed + 2 * SEEDS);
        const state = randomState(r);
        const runId = `run-${Math.floor(r() * 4)}`;
        const addresses = Array.from({ length: 1 + Math.floor(r() * 8) }, () => {
          const text = randomAddress(r);
          return { text, parsed: parseInstanceAddress(text) };
        });
        expect({ seed, outside: uncovered(state, runId, addresses) }).toEqual({
          seed,
          outside: pairwiseUncovered(state, runId, addresses),
        });
      });
    }
  });

  it('changedSince finds the addresses changed after the base that a planned glob covers', () => {
    let stale = 0;
    const seeds = fuzzSeeds(seedRange(1, SEEDS));
    for (const seed of seeds) {
      withSeed(seed, () => {
        const r = rng(seed + 3 * SEEDS);
        const changedIn = LayeredMap.of<string, number>();
        const count = Math.floor(r() * 20);
        for (let i = 0; i < count; i++) changedIn.set(randomAddress(r), 1 + Math.floor(r() * 4));
        const state = { ...randomState(r), changedIn };
        const globs = Array.from({ length: 1 + Math.floor(r() * 6) }, () =>
          parseAddressGlob(randomGlob(r)),
        );
        const expected = pairwiseChangedSince(state, 2, globs);
        expect({ seed, stale: changedSince(state, 2, globs) }).toEqual({ seed, stale: expected });
        stale += expected.length;
      });
    }
    expect(stale).toBeGreaterThan(seeds.length / 2);
  });

  it("sees a run's reservations added in place to a map it answered for before", () => {
    for (const seed of fuzzSeeds([1])) {
      withSeed(seed, () => {
        const state = randomState(rng(seed));
        state.reservations.clear();
        state.locks.clear();
        const add = (id: string, glob: string) =>
          state.reservations.set(id, {
            id,
            runId: 'run-b',
            glob,
            mode: 'write',
            holder: 'bob',
            info: {},
            acquiredAt: PAST,
            expiresAt: LATER,
          });
        add('b0', 'aws_x.m[0]');
        const wanted = [{ glob: parseAddressGlob('aws_x.m[1]'), mode: 'write' as const }];
        expect(conflictsWith(state, wanted, {}, NOW).live.map((h) => h.glob)).toEqual([]);
        // evolve adds a run's later reservations of one append to the map its first made
        add('b1', 'aws_x.m[1]');
        expect(conflictsWith(state, wanted, {}, NOW).live.map((h) => h.glob)).toEqual([
          'aws_x.m[1]',
        ]);
      });
    }
  });

  it("parses a run's globs once, a heartbeat's new lease included", () => {
    const { globs, held } = runOfFifty(PAST);
    const wanted = [{ glob: parseAddressGlob('module.m7.aws_x.a[1]'), mode: 'read' as const }];
    const parsed = mockParsed.count;
    // The lease ran out: the run is reclaimed, not in the way.
    const before = conflictsWith(held, wanted, { runId: 'run-b' }, NOW);
    expect([before.live.length, [...before.expired.keys()]]).toEqual([0, ['run-a']]);
    expect(mockParsed.count - parsed).toBe(globs.length);
    const renewed = evolve(held, {
      type: 'ReservationRenewed',
      data: {
        stateId: 's',
        runId: 'run-a',
        reservationIds: globs.map((_, i) => `a${i}`),
        expiresAt: LATER,
      },
    }) as ActiveState;
    // Renewed, the run is in the way, and nothing was parsed again.
    const after = conflictsWith(renewed, wanted, { runId: 'run-b' }, NOW);
    expect(after.live.map((h) => [h.glob, h.expiresAt])).toEqual([['module.m7.aws_x.a', LATER]]);
    expect(mockParsed.count - parsed).toBe(globs.length);
  });
  /**
   * A random history of runs starting, renewing (a lease that ran out, or a
   * live one), releasing and being reclaimed, folded by evolve: after each
   * event, the checks on the state (its indexes kept warm from state to
   * state, across renewals) answer as the pairwise matrix on the same state.
   */
  it('answers as the pairwise matrix along random histories of runs and their heartbeats', () => {
    let checks = 0;
    let renewals = 0;
    let named = 0;
    const seeds = fuzzSeeds(seedRange(1, 60));
    for (const seed of seeds) {
      withSeed(seed, () => {
        const r = rng(seed + 4 * SEEDS);
        let state = evolve(initialState(), {
          type: 'StateCreated',
          data: { stateId: 's', name: 'prod' },
        }) as ActiveState;
        let runs = 0;
        for (let step = 0; step < 25; step++) {
          const held = [...new Set([...state.reservations.values()].map((x) => x.runId))];
          const x = r();
          let events: StateEvent[];
          if (held.length === 0 || x < 0.35) {
            const runId = `run-${runs++}`;
            const asked = new Set<string>();
            events = [];
            for (let i = 0; i < 1 + Math.floor(r() * 12); i++) {
              const glob = normalizeAddressGlob(randomGlob(r));
              const mode = pick(r, MODES);
              if (asked.has(`${mode} ${glob}`)) continue;
              asked.add(`${mode} ${glob}`);
              events.push({
                type: 'ReservationAcquired',
                data: {
                  stateId: 's',
                  reservationId: `${runId}-r${i}`,
                  runId,
                  glob,
                  mode,
                  holder: 'alice',
                  ...(events.length === 0 ? { info: {} } : {}),
                  acquiredAt: PAST,
                  expiresAt: r() < 0.3 ? PAST : LATER,
                },
              });
            }
          } else {
            const runId = pick(r, held);
            const reservationIds = [...state.reservations.values()]
              .filter((h) => h.runId === runId)
              .map((h) => h.id);
            if (x < 0.8) {
              renewals++;
              events = [
                {
                  type: 'ReservationRenewed',
                  data: {
                    stateId: 's',
                    runId,
                    reservationIds,
                    expiresAt: r() < 0.3 ? PAST : LATER,
                  },
                },
              ];
            } else {
              events = [
                {
                  type: 'ReservationReleased',
                  data: { stateId: 's', runId, reservationIds, reason: 'committed' },
                },
              ];
            }
          }
          const before = state;
          state = events.reduce<StateAggregate>((s, e) => evolve(s, e), state) as ActiveState;
          if (r() < 0.3) {
            // Another history from the same state (a decision retried on the tail), checked too.
            const other = evolve(before, {
              type: 'ReservationAcquired',
              data: {
                stateId: 's',
                reservationId: `other-${step}`,
                runId: `other-${step}`,
                glob: normalizeAddressGlob(randomGlob(r)),
                mode: pick(r, MODES),
                holder: 'bob',
                info: {},
                acquiredAt: PAST,
                expiresAt: LATER,
              },
            }) as ActiveState;
            const wanted = [{ glob: parseAddressGlob(randomGlob(r)), mode: pick(r, MODES) }];
            expect({ seed, step, ...conflictsWith(other, wanted, {}, NOW) }).toEqual({
              seed,
              step,
              ...pairwiseConflicts(other, wanted, {}, NOW),
            });
          }
          const asker = randomAsker(r, state);
          const wanted = Array.from({ length: 1 + Math.floor(r() * 4) }, () => ({
            glob: parseAddressGlob(randomGlob(r)),
            mode: pick(r, MODES),
          }));
          const addresses = Array.from({ length: 1 + Math.floor(r() * 4) }, () => {
            const text = randomAddress(r);
            return { text, parsed: parseInstanceAddress(text) };
          });
          const runId = `run-${Math.floor(r() * runs)}`;
          const expected = pairwiseConflicts(state, wanted, asker, NOW);
          expect({ seed, step, ...conflictsWith(state, wanted, asker, NOW) }).toEqual({
            seed,
            step,
            ...expected,
          });
          expect({ seed, step, ...coveringHolders(state, addresses, asker, NOW) }).toEqual({
            seed,
            step,
            ...pairwiseCovering(state, addresses, asker, NOW),
          });
          expect({ seed, step, outside: uncovered(state, runId, addresses) }).toEqual({
            seed,
            step,
            outside: pairwiseUncovered(state, runId, addresses),
          });
          checks++;
          named += expected.live.length + expected.expired.size;
        }
      });
    }
    expect([checks, renewals > seeds.length * 5, named > checks / 2]).toEqual([
      seeds.length * 25,
      true,
      true,
    ]);
  });

  it("keeps a run's glob index across its heartbeat: the next check indexes nothing", () => {
    const { globs, held } = runOfFifty(LATER);
    const wanted = [{ glob: parseAddressGlob('module.m7.aws_x.a[1]'), mode: 'write' as const }];
    const indexed = jest.spyOn(GlobIndex.prototype, 'add');
    try {
      expect(conflictsWith(held, wanted, { runId: 'run-b' }, NOW).live).toHaveLength(1);
      expect(indexed).toHaveBeenCalledTimes(globs.length);
      indexed.mockClear();
      const renewed = evolve(held, {
        type: 'ReservationRenewed',
        data: {
          stateId: 's',
          runId: 'run-a',
          reservationIds: globs.map((_, i) => `a${i}`),
          expiresAt: '2026-12-01T14:00:00.000Z',
        },
      }) as ActiveState;
      const after = conflictsWith(renewed, wanted, { runId: 'run-b' }, NOW).live;
      // The holder shows the new lease; the index was not built again.
      expect(after.map((h) => [h.glob, h.expiresAt])).toEqual([
        ['module.m7.aws_x.a', '2026-12-01T14:00:00.000Z'],
      ]);
      expect(indexed).not.toHaveBeenCalled();
    } finally {
      indexed.mockRestore();
    }
  });

  it('builds the glob indexes in pieces ahead of a check, which then indexes nothing', () => {
    const indexed = jest.spyOn(GlobIndex.prototype, 'add');
    try {
      const seeds = fuzzSeeds(seedRange(1, 100));
      for (const seed of seeds) {
        withSeed(seed, () => {
          const r = rng(seed + 5 * SEEDS);
          const state = randomState(r);
          const wanted = Array.from({ length: 1 + Math.floor(r() * 4) }, () => ({
            glob: parseAddressGlob(randomGlob(r)),
            mode: pick(r, MODES),
          }));
          const asker = randomAsker(r, state);
          const expected = pairwiseConflicts(state, wanted, asker, NOW);
          const pieces = [...indexInPieces(state, 3)];
          expect(pieces).toHaveLength(Math.floor(state.reservations.size / 3));
          indexed.mockClear();
          expect({ seed, ...conflictsWith(state, wanted, asker, NOW) }).toEqual({
            seed,
            ...expected,
          });
          expect(indexed).not.toHaveBeenCalled();
        });
      }
      // A check while the pieces are under way builds its own, and the pieces change nothing.
      for (const seed of fuzzSeeds([7])) {
        withSeed(seed, () => {
          const state = randomState(rng(seed));
          const wanted = [{ glob: parseAddressGlob('*'), mode: 'write' as const }];
          const pieces = indexInPieces(state, 1)[Symbol.iterator]();
          pieces.next();
          const during = conflictsWith(state, wanted, {}, NOW);
          while (!pieces.next().done);
          expect(conflictsWith(state, wanted, {}, NOW)).toEqual(during);
          expect(during).toEqual(pairwiseConflicts(state, wanted, {}, NOW));
        });
      }
    } finally {
      indexed.mockRestore();
    }
  });

  it('indexes only what is new after a run starts or ends beside another', () => {
    const created = evolve(initialState(), {
      type: 'StateCreated',
      data: { stateId: 's', name: 'prod' },
    });
    const run = (runId: string, count: number): StateEvent[] =>
      Array.from({ length: count }, (_, i) => ({
        type: 'ReservationAcquired',
        data: {
          stateId: 's',
          reservationId: `${runId}-${i}`,
          runId,
          glob: `module.${runId}${i}.aws_x.a`,
          mode: 'write',
          holder: 'alice',
          ...(i === 0 ? { info: {} } : {}),
          acquiredAt: PAST,
          expiresAt: LATER,
        },
      }));
    const fold = (state: StateAggregate, events: StateEvent[]) =>
      events.reduce((s, e) => evolve(s, e), state) as ActiveState;
    const wanted = [{ glob: parseAddressGlob('module.a7.aws_x.a'), mode: 'write' as const }];
    const indexed = jest.spyOn(GlobIndex.prototype, 'add');
    try {
      const a = fold(created, run('a', 40));
      expect(conflictsWith(a, wanted, {}, NOW).live).toHaveLength(1);
      expect(indexed).toHaveBeenCalledTimes(40);
      indexed.mockClear();
      const ab = fold(a, run('b', 3));
      expect(conflictsWith(ab, wanted, {}, NOW).live).toHaveLength(1);
      expect(indexed).toHaveBeenCalledTimes(3);
      indexed.mockClear();
      // Run a released: its reservations are in no answer, and nothing is indexed.
      const b = fold(ab, [
        {
          type: 'ReservationReleased',
          data: {
            stateId: 's',
            runId: 'a',
            reservationIds: Array.from({ length: 40 }, (_, i) => `a-${i}`),
            reason: 'committed',
          },
        },
      ]);
      expect(conflictsWith(b, wanted, {}, NOW).live).toEqual([]);
      const all = [{ glob: parseAddressGlob('*'), mode: 'write' as const }];
      expect(conflictsWith(b, all, {}, NOW).live.map((h) => h.runId)).toEqual(['b', 'b', 'b']);
      expect(indexed).not.toHaveBeenCalled();
    } finally {
      indexed.mockRestore();
    }
  });
});
