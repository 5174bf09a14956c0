import {
  createEmptyDatabase,
  quietLogger,
  TestDatabase,
} from '../../../test/support/test-database';
import { loadMigrations, migrate } from '../../infrastructure/postgres/migrator';
import { DashboardReadModel } from '../../infrastructure/read-models/dashboard-read-model';
import { snapshotTables, StateHarness, testDocument } from '../../../test/support/state-harness';

const LIFECYCLES = 'state-resource-lifecycles';
const DEPENDENCIES = 'state-resource-dependencies';

describe('resource_dependencies, a view over the lifecycles (migration 035)', () => {
  let h: StateHarness;
  beforeAll(async () => {
    h = await StateHarness.create();
  });
  afterAll(async () => {
    await h.close();
  });

  const edges = async () =>
    (
      await h.db.query<{ edge: string }>(
        `SELECT from_address || ' -> ' || to_address || ' ' || create_version || '..' ||
                coalesce(delete_version::text, '') || ' ' || create_serial || '..' ||
                coalesce(delete_serial::text, '') AS edge
           FROM resource_dependencies ORDER BY 1`,
      )
    ).map((r) => r.edge);

  it('holds each distinct target a lifecycle declares, ended with its lifecycle, and a rebuild keeps it', async () => {
    await h.commit(
      'deps',
      testDocument(1, [
        { name: 'hub', input: 'a' },
        // a target named twice is one edge
        {
          name: 'web',
          key: 0,
          input: 'b',
          dependsOn: ['terraform_data.hub', 'terraform_data.hub'],
        },
        { name: 'web', key: 1, input: 'c', dependsOn: ['terraform_data.hub'] },
      ]),
    );
    // web[1] replaced (a close and an open), db added naming web and one never deployed.
    await h.commit(
      'deps',
      testDocument(2, [
        { name: 'hub', input: 'a' },
        {
          name: 'web',
          key: 0,
          input: 'b',
          dependsOn: ['terraform_data.hub', 'terraform_data.hub'],
        },
        { name: 'web', key: 1, input: 'changed', dependsOn: ['terraform_data.hub'] },
        { name: 'db', input: 'd', dependsOn: ['terraform_data.web', 'terraform_data.never'] },
      ]),
    );
    expect(await edges()).toEqual([
      'terraform_data.db -> terraform_data.never 2.. 2..',
      'terraform_data.db -> terraform_data.web 2.. 2..',
      'terraform_data.web[0] -> terraform_data.hub 1.. 1..',
      'terraform_data.web[1] -> terraform_data.hub 1..2 1..2',
      'terraform_data.web[1] -> terraform_data.hub 2.. 2..',
    ]);
    const [web] = await h.db.query<{ from_resource_address: string }>(
      `SELECT DISTINCT from_resource_address FROM resource_dependencies
        WHERE from_address = 'terraform_data.web[1]'`,
    );
    expect(web.from_resource_address).toBe('terraform_data.web');

    const live = await snapshotTables(h.db, ['resource_dependencies', 'resources']);
    await h.runner.rebuild();
    expect(await snapshotTables(h.db, ['resource_dependencies', 'resources'])).toEqual(live);
  });

  it('reads only the string elements of an array: other `dependencies` declare nothing', async () => {
    // The parser accepts nothing else; a row holding it must still read as
    // the projector wrote it (no edge for what is not a string target).
    await h.commit(
      'odd',
      testDocument(1, [
        { name: 'a', input: '1', dependsOn: ['terraform_data.x'] },
        { name: 'b', input: '2', dependsOn: ['terraform_data.x'] },
        { name: 'c', input: '3', dependsOn: ['terraform_data.x'] },
      ]),
    );
    const set = (address: string, dependencies: string | null) =>
      h.db.query(
        `UPDATE resources r SET dependencies = $2::jsonb FROM states s
          WHERE s.state_id = r.state_id AND s.name = 'odd' AND r.address = $1`,
        [address, dependencies],
      );
    await set('terraform_data.a', '"terraform_data.x"');
    await set('terraform_data.b', null);
    await set('terraform_data.c', '[1, null, {"to": "y"}, "terraform_data.y", ["z"]]');
    expect(
      await h.db.query(
        `SELECT d.from_address, d.to_address FROM resource_dependencies d
           JOIN states s USING (state_id) WHERE s.name = 'odd'`,
      ),
    ).toEqual([{ from_address: 'terraform_data.c', to_address: 'terraform_data.y' }]);
  });

  it("gives the dashboard a resource's first 200 dependents by address, across the dependent resources", async () => {
    // All 150 instances of `a`, the even ones of `b`'s 120 and all 210 of
    // `c` declare hub; `d` does not. By address: a's, then b's, then c's.
    const hub = 'terraform_data.hub';
    const many = (name: string, n: number, declares: (k: number) => boolean) =>
      Array.from({ length: n }, (_, k) => ({
        name,
        key: k,
        input: `${name}${k}`,
        dependsOn: declares(k) ? [hub] : [],
      }));
    await h.commit(
      'fan',
      testDocument(1, [
        { name: 'hub', input: 'h' },
        ...many('a', 150, () => true),
        ...many('b', 120, (k) => k % 2 === 0),
        ...many('c', 210, () => true),
        { name: 'd', input: 'd' },
      ]),
    );
    const declaring = (
      await h.db.query<{ from_address: string }>(
        `SELECT d.from_address FROM resource_dependencies d JOIN states s USING (state_id)
          WHERE s.name = 'fan' AND d.to_address = $1 AND d.delete_version IS NULL`,
        [hub],
      )
    )
      .map((r) => r.from_address)
      .sort();
    expect(declaring).toHaveLength(420);
    const n = await new DashboardReadModel(h.db).neighbours('fan', hub);
    expect(n.dependentsTotal).toBe(420);
    expect(n.dependents).toEqual(declaring.slice(0, 200));
    expect(n.dependents.filter((a) => a.startsWith('terraform_data.b['))).toHaveLength(50);
  });

  it('has no projector of its own any more', async () => {
    await h.commit('deps', testDocument(3, [{ name: 'hub', input: 'z' }]));
    const projections = (
      await h.db.query<{ projection: string }>('SELECT projection FROM kl_checkpoints')
    ).map((r) => r.projection);
    expect(projections).toContain(LIFECYCLES);
    expect(projections).not.toContain(DEPENDENCIES);
    expect(h.projectors.map((p) => p.name)).not.toContain(DEPENDENCIES);
  });
});

describe('migration 035 on a database with the edge projector', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createEmptyDatabase();
  });
  afterAll(async () => {
    await t.drop();
  });

  it("drops the table and the projector's checkpoint and skips, keeping the others'", async () => {
    const all = loadMigrations();
    await migrate(
      t.url,
      quietLogger,
      all.filter((m) => m.id < 35),
    );
    for (const projection of [LIFECYCLES, DEPENDENCIES]) {
      await t.db.query(`INSERT INTO kl_checkpoints (projection, global_position) VALUES ($1, 42)`, [
        projection,
      ]);
      await t.db.query(
        `INSERT INTO kl_projection_skips (projection, global_position, reason)
         VALUES ($1, 7, 'poison')`,
        [projection],
      );
    }
    await migrate(t.url, quietLogger, all);
    expect(
      await t.db.query(
        `SELECT c.projection, c.global_position::int AS at, s.global_position::int AS skip
           FROM kl_checkpoints c LEFT JOIN kl_projection_skips s USING (projection)
          ORDER BY 1`,
      ),
    ).toEqual([{ projection: LIFECYCLES, at: 42, skip: 7 }]);
    expect(
      await t.db.query(
        `SELECT relkind FROM pg_class WHERE oid = 'resource_dependencies'::regclass`,
      ),
    ).toEqual([{ relkind: 'v' }]);
  });
});
