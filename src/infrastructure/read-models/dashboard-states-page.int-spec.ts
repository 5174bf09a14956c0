import { StateHarness, testDocument } from '../../../test/support/state-harness';
import { DashboardReadModel, StatePageQuery } from './dashboard-read-model';

/**
 * The States page takes a page of states before building their locks, drift
 * and apply runs (for sorts by a state's own columns): every page must be the
 * same rows, in the same order, as the slice of the whole sorted list, and
 * each row the same as the join-first query (the lock sort) builds for it.
 */
describe('DashboardReadModel.states: page first, then join', () => {
  const MANY = 75;
  const name = (i: number) => `page/s-${String(i).padStart(3, '0')}`;
  /** 1–9 instances, so sorting by them reorders the names. */
  const instancesOf = (i: number) => 1 + ((i * 7) % 9);
  let h: StateHarness;
  let model: DashboardReadModel;

  beforeAll(async () => {
    h = await StateHarness.create();
    model = new DashboardReadModel(h.db);
    for (let i = 0; i < MANY; i++) {
      const instances = Array.from({ length: instancesOf(i) }, (_, k) => ({
        name: 'n',
        key: k,
        input: `${i}-${k}`,
      }));
      // Some states twice, so versions and serials differ too.
      await h.commit(name(i), testDocument(1, instances, {}, `lineage-${i}`));
      if (i % 4 === 0) await h.commit(name(i), testDocument(2, instances, {}, `lineage-${i}`));
      h.advance(1);
    }
    // Locks, and apply runs holding reservations, on some of them.
    for (let i = 0; i < MANY; i += 6) await h.lock(name(i), `lock-${i}`, `user-${i}`);
    for (let i = 1; i < MANY; i += 5) {
      const stateId = await h.stateId(name(i));
      for (const run of [`run-a-${i}`, `run-b-${i}`].slice(0, 1 + (i % 2))) {
        await h.db.query(
          `WITH info AS (INSERT INTO reservation_run_info (state_id, run_id, info)
                         VALUES ($1, $3, '{}'))
           INSERT INTO reservation_holders
             (state_id, state_name, id, kind, run_id, address_glob, mode, holder, acquired_at)
           VALUES ($1, $2, $3, 'apply', $3, '*', 'write', $4, now())`,
          [stateId, name(i), run, `holder-${run}`],
        );
      }
    }
  }, 120_000);

  afterAll(async () => {
    await h.close();
  });

  const sorts: StatePageQuery['sort'][] = ['name', 'version', 'serial', 'instances', 'written'];

  it.each(sorts)('sorted by %s: every page is its slice of the whole list', async (sort) => {
    // The join-first query builds every row; its rows are the reference.
    const joined = new Map(
      (await model.states(null, { sort: 'lock' })).states.map((s) => [s.name, s]),
    );
    expect(joined.size).toBe(MANY);
    expect([...joined.values()].filter((s) => s.lock !== null)).toHaveLength(13);
    expect([...joined.values()].filter((s) => s.applyRuns.count === 2)).toHaveLength(8);
    for (const desc of [false, true]) {
      const whole = await model.states(null, { sort, desc });
      expect(whole.states.map((s) => joined.get(s.name))).toEqual(whole.states);
      if (sort === 'name') {
        const names = Array.from({ length: MANY }, (_, i) => name(i));
        expect(whole.states.map((s) => s.name)).toEqual(desc ? names.reverse() : names);
      }
      if (sort === 'instances') {
        const counts = whole.states.map((s) => s.instanceCount);
        expect(counts).toEqual([...counts].sort((a, b) => (desc ? b - a : a - b)));
      }
      for (const limit of [1, 7, 20]) {
        const pages = [];
        for (let offset = 0; offset < MANY + limit; offset += limit) {
          const page = await model.states(null, { sort, desc, limit, offset });
          expect(page).toMatchObject({ total: MANY, unfiltered: MANY, offset });
          pages.push(...page.states);
        }
        expect(pages).toEqual(whole.states);
      }
      // With a glob and the names a reader may read.
      const some = await model.states(['page/s-0%'], { sort, desc, glob: '*-0?5', limit: 3 });
      expect(some.total).toBe(7);
      expect(some.states).toEqual(
        whole.states.filter((s) => /^page\/s-0\d5$/.test(s.name)).slice(0, 3),
      );
    }
  });
});
