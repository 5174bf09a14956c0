import { StateHarness, testDocument } from '../support/state-harness';

/** After a bulk commit the planner must not believe the read models are empty. */
describe('statistics after a bulk commit', () => {
  let h: StateHarness;
  beforeAll(async () => (h = await StateHarness.create()));
  afterAll(async () => h.close());

  it('analyzes the lifecycle tables soon after a 3,000-instance commit', async () => {
    const analyzed = async () =>
      (
        await h.db.query<{ relname: string; n: string }>(
          `SELECT relname, coalesce(last_analyze, last_autoanalyze)::text AS n
             FROM pg_stat_user_tables WHERE relname IN ('resources', 'resource_dependencies')`,
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
    while ((await analyzed()) < 2 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(await analyzed()).toBe(2);
    const [stats] = await h.db.query<{ reltuples: number }>(
      `SELECT reltuples FROM pg_class WHERE relname = 'resources'`,
    );
    expect(stats.reltuples).toBeGreaterThan(2000);
  });
});
