import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DashboardReadModel } from '../../infrastructure/read-models/dashboard-read-model';
import {
  snapshotTables,
  StateHarness,
  TestInstance,
  testDocument,
} from '../../../test/support/state-harness';
import { fuzzSeeds, seededRandom, withSeed } from '../../../test/support/seeded-random';

/** mulberry32: a failure replays the same workload. */
const EDGE_TABLES = ['resource_edges', 'resource_edge_sources'];
const NAMES = ['hub', 'web', 'db', 'queue', 'cache', 'worker'];
const MODULES = [undefined, 'module.net', 'module.app["blue"]'];
const resourceOf = (i: { module?: string; name: string }) =>
  `${i.module ? `${i.module}.` : ''}terraform_data.${i.name}`;

describe.each(fuzzSeeds([23]))(
  'resource_edges (dependency edges between resource addresses) (seed %i)',
  (seed) => {
    let h: StateHarness;
    beforeAll(async () => {
      h = await StateHarness.create();
    });
    afterAll(async () => {
      await h.close();
    });

    const edges = async (name: string) =>
      (
        await h.db.query<{ from: string; to: string; instances: number }>(
          `SELECT e.from_resource_address AS from, e.to_address AS to, e.instances
           FROM resource_edges e JOIN states s USING (state_id)
          WHERE s.name = $1 AND s.deleted_at IS NULL ORDER BY 1, 2`,
          [name],
        )
      ).map((r) => `${r.from} -> ${r.to} ×${r.instances}`);

    /** The same edges from the instance-level view over the lifecycles (resource_dependencies). */
    const fromInstanceEdges = async (name: string) =>
      (
        await h.db.query<{ from: string; to: string; instances: number }>(
          `SELECT d.from_resource_address AS from, d.to_address AS to, count(*)::int AS instances
           FROM resource_dependencies d JOIN states s USING (state_id)
          WHERE s.name = $1 AND s.deleted_at IS NULL AND d.delete_version IS NULL
          GROUP BY 1, 2 ORDER BY 1, 2`,
          [name],
        )
      ).map((r) => `${r.from} -> ${r.to} ×${r.instances}`);

    /** What the model says: one edge per (resource, named resource), counting instances. */
    const expected = (instances: Iterable<TestInstance>) => {
      const counts = new Map<string, number>();
      for (const i of instances) {
        for (const to of new Set(i.dependsOn ?? [])) {
          const k = `${resourceOf(i)} -> ${to}`;
          counts.set(k, (counts.get(k) ?? 0) + 1);
        }
      }
      return [...counts]
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([k, n]) => `${k} ×${n}`);
    };

    const instanceOf = (i: TestInstance) =>
      `${resourceOf(i)}${i.key === undefined ? '' : `[${JSON.stringify(i.key)}]`}`;

    /** The dashboard's "Depended on by" of one live instance per resource: the model's dependents. */
    const expectDashboardNeighbours = async (instances: Iterable<TestInstance>) => {
      const all = [...instances];
      const byResource = new Map(all.map((i) => [resourceOf(i), i]));
      const dashboard = new DashboardReadModel(h.db);
      for (const [resource, one] of byResource) {
        const dependents = all
          .filter((i) => (i.dependsOn ?? []).includes(resource))
          .map(instanceOf)
          .sort();
        const n = await dashboard.neighbours('edges', instanceOf(one));
        expect({ resource: n.resourceAddress, total: n.dependentsTotal }).toEqual({
          resource,
          total: dependents.length,
        });
        expect(n.dependents).toEqual(dependents.slice(0, n.dependents.length));
        expect(n.dependents.length).toBe(Math.min(dependents.length, 200));
      }
    };

    it('stays exact over random deltas, a projection rebuild and the migration backfill', () =>
      withSeed(seed, async () => {
        const { next: rnd, pick } = seededRandom(seed);
        const model = new Map<string, TestInstance>();
        let counter = 0;
        const id = (i: TestInstance) => JSON.stringify([i.module ?? '', i.name, i.key ?? null]);
        const deps = (): string[] | undefined => {
          if (rnd() < 0.25) return undefined;
          // Named resources may be realized, removed, or never deployed; repeats are kept.
          return Array.from({ length: 1 + Math.floor(rnd() * 3) }, () =>
            rnd() < 0.1
              ? 'terraform_data.never'
              : resourceOf({ module: pick(MODULES), name: pick(NAMES) }),
          );
        };
        const add = () => {
          counter += 1;
          // One key kind per resource: hub has none, the rest are counted.
          const name = pick(NAMES);
          const i: TestInstance = {
            name,
            module: pick(MODULES),
            key: name === 'hub' ? undefined : counter % 40,
            input: `v${counter}`,
            dependsOn: deps(),
          };
          model.set(id(i), i);
        };
        for (let n = 0; n < 120; n++) add();

        for (let serial = 1; serial <= 30; serial++) {
          const ids = [...model.keys()];
          const step = rnd();
          if (step < 0.15 && ids.length) {
            // a whole resource removed
            const victim = model.get(pick(ids))!;
            for (const [k, i] of model) if (resourceOf(i) === resourceOf(victim)) model.delete(k);
          } else if (step < 0.2) {
            for (let n = 0; n < 60; n++) add(); // a big change
          } else {
            for (let n = Math.floor(rnd() * 6); n > 0 && ids.length; n--) {
              const k = pick(ids);
              const i = model.get(k);
              if (!i) continue;
              const r = rnd();
              if (r < 0.3) model.delete(k);
              else if (r < 0.7) model.set(k, { ...i, dependsOn: deps(), input: `${i.input}'` });
              else model.set(k, { ...i, input: `${i.input}'` });
            }
            for (let n = Math.floor(rnd() * 4); n > 0; n--) add();
          }
          await h.commit('edges', testDocument(serial, [...model.values()]));
          const now = await edges('edges');
          expect(now).toEqual(expected(model.values()));
          expect(now).toEqual(await fromInstanceEdges('edges'));
          await expectDashboardNeighbours(model.values());
        }
        expect((await edges('edges')).length).toBeGreaterThan(10);

        // A second state keeps its own edges; deleting one leaves the other exact.
        await h.commit(
          'other',
          testDocument(1, [{ name: 'x', input: '1', dependsOn: ['terraform_data.hub'] }]),
        );
        expect(await edges('other')).toEqual(['terraform_data.x -> terraform_data.hub ×1']);

        const live = await snapshotTables(h.db, EDGE_TABLES);
        await h.runner.rebuild();
        expect(await snapshotTables(h.db, EDGE_TABLES)).toEqual(live);

        // The migration fills both tables of a database projected before it from
        // the lifecycles: the same rows.
        const migration = readFileSync(
          join(__dirname, '../../../migrations/023_resource_edges.sql'),
          'utf8',
        );
        const backfill = migration.slice(
          migration.indexOf('INSERT INTO resource_edge_sources'),
          migration.indexOf('INSERT INTO kl_checkpoints'),
        );
        await h.db.query('DELETE FROM resource_edges');
        await h.db.query('DELETE FROM resource_edge_sources');
        for (const statement of backfill.split(';').filter((s) => s.trim()))
          await h.db.query(statement);
        expect(await snapshotTables(h.db, EDGE_TABLES)).toEqual(live);
      }));
  },
);
