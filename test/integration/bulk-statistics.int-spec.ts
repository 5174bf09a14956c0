import { StateHarness, testDocument } from '../support/state-harness';

/** After a bulk commit the planner must not believe the read models are empty. */
describe('statistics after a bulk commit', () => {
  let h: StateHarness;
  beforeAll(async () => (h = await StateHarness.create()));
  afterAll(async () => h.close());

  it('analyzes the lifecycle tables, and the states they join, soon after a 3,000-instance commit', async () => {
    const analyzed = async () =>
      (
        await h.db.query<{ relname: string; n: string }>(
          `SELECT relname, coalesce(last_analyze, last_autoanalyze)::text AS n
             FROM pg_stat_user_tables WHERE relname IN ('resources', 'resource_edge_sources', 'states')`,
        )
      ).filter((r) => r.n !== null).length;
    expect(await analyzed()).toBe(0);

    const instances = Array.from({ length: 3000 }, (_, i) => ({
      name: 'x',
      key: i,
      input: `v${i}`,
      dependsOn: ['terraform_data.leader'],
    }));
    await h.run(
      h.commitCommand('bulk', testDocument(1, [{ name: 'leader', input: 'l' }, ...instances]), {
        source: 'import',
      }),
    );

    const deadline = Date.now() + 15_000;
    while ((await analyzed()) < 3 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(await analyzed()).toBe(3);
    const [stats] = await h.db.query<{ reltuples: number }>(
      `SELECT reltuples FROM pg_class WHERE relname = 'resources'`,
    );
    expect(stats.reltuples).toBeGreaterThan(2000);
    // A never-analyzed states table passes for hundreds of rows, and the
    // planner then expects a state's thousands of resources to be a few dozen.
    const [states] = await h.db.query<{ reltuples: number }>(
      `SELECT reltuples FROM pg_class WHERE relname = 'states'`,
    );
    expect(states.reltuples).toBe(1);
    // Taken from a small sample, so it holds a core briefly while other
    // callers' commands run: 3,000 distinct addresses, a histogram of at most
    // 11 bounds (PostgreSQL's default sample would give 101).
    const [address] = await h.db.query<{ bounds: number; distinct: number }>(
      `SELECT array_length(histogram_bounds::text::text[], 1) AS bounds, n_distinct AS distinct
         FROM pg_stats WHERE tablename = 'resources' AND attname = 'address'`,
    );
    expect(address.bounds).toBeLessThanOrEqual(11);
    expect(address.distinct === -1 || address.distinct > 2000).toBe(true);
  });

  it('refreshes them once, after the whole catch-up, not between the batches of a big commit', async () => {
    // A database of its own: the first test's commit may still have a second
    // pass of its statistics to run (batches that landed during its first),
    // which would count here.
    const own = await StateHarness.create();
    try {
      await refreshesOnce(own);
    } finally {
      await own.close();
    }
  });
});

/** A 10,500-instance commit's statistics are refreshed once, after its catch-up. */
async function refreshesOnce(h: StateHarness): Promise<void> {
  const analyses = async () =>
    Number(
      (
        await h.db.query<{ n: string }>(
          `SELECT analyze_count AS n FROM pg_stat_user_tables WHERE relname = 'resources'`,
        )
      )[0].n,
    );
  const before = await analyses();
  // 10,500 lifecycles: the writer catches up in three batches, two of them big.
  const instances = Array.from({ length: 10_500 }, (_, i) => ({
    name: 'y',
    key: i,
    input: `${i}`,
  }));
  await h.run(h.commitCommand('bigger', testDocument(1, instances), { source: 'import' }));
  // Before the fix, the first big batch started a VACUUM (ANALYZE) that
  // ran (and finished) while the next batches were written.
  expect(await analyses()).toBe(before);

  const deadline = Date.now() + 15_000;
  while ((await analyses()) === before && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
  }
  expect(await analyses()).toBe(before + 1);
  // ...and a second pass for the batches that landed meanwhile: none now.
  await new Promise((r) => setTimeout(r, 3000));
  expect(await analyses()).toBe(before + 1);
}
