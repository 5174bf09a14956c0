import { Client } from 'pg';
import { startKld } from '../support/kld-process';
import { READ_MODEL_TABLES, snapshotTables } from '../support/state-harness';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { oneResourceState } from '../../bench/support/one-resource-state';
import { socketPost } from '../../bench/support/socket-post';
import { until } from '../support/until';

/**
 * kld stopped while its projectors apply a big commit: a refresh run's
 * finish of SIZE changed instances, whose lifecycles' batch waits in
 * PostgreSQL (another session holds the table it writes) for as long as the
 * stop lasts, as a big batch on a loaded machine ran past kld's deadline
 * before (docs/operations.md). The stop cuts the batch short and exits 0
 * within its bound; the next start projects the commit, and the read models
 * are then what a rebuild of the log makes.
 */

jest.setTimeout(240_000);

// A big commit as the projectors see one: over 6,000 events, one batch above
// the size that refreshes statistics and the log's catch-up batch (5,000).
// The lock holds the batch for as long as the stop lasts, whatever its size,
// so a bigger state (20,000 before, most of this spec's time) adds nothing.
const SIZE = 3_000;
const STATE = 'team/refreshed';
const TABLES = [...READ_MODEL_TABLES, 'refresh_runs', 'refresh_results'];

const doc = (serial: number, suffix: string) =>
  oneResourceState({
    serial,
    count: SIZE,
    lineage: 'stop-mid-projection',
    attributes: (i) => ({ id: `id-${i}${suffix}` }),
  });

async function call(url: string, method: string, path: string, body?: unknown) {
  const r = await fetch(`${url}${path}`, {
    method,
    headers: { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, body: text === '' ? null : JSON.parse(text) };
}

describe('a stop while the projectors apply a big commit', () => {
  let t: TestDatabase;

  beforeAll(async () => {
    t = await createTestDatabase('kl_stop_projection');
  });

  afterAll(async () => {
    await t?.drop();
  });

  it('cuts the batch short: exit 0 within the bound, and the next start projects the commit as a rebuild does', async () => {
    const kld = await startKld({ KL_DATABASE_URL: t.url });
    const holder = new Client({ connectionString: t.url });
    let held = false;
    try {
      expect((await call(kld.url, 'POST', `/v1/states/${STATE}`, doc(1, ''))).status).toBe(200);
      const started = await call(kld.url, 'POST', '/v1/refresh-runs', { state: STATE });
      expect(started.status).toBe(201);
      const run = started.body.run_id as string;

      await holder.connect();
      await holder.query('BEGIN; LOCK TABLE resources IN SHARE MODE');
      held = true;
      const body = JSON.stringify({ status: 'succeeded', document: doc(2, '-refreshed') });
      const { closed } = await socketPost(kld.url, `/v1/refresh-runs/${run}/finish`, {}, body);
      // The commit is in the log, and the lifecycles' batch waits for the table.
      await until('the refresh committed', async () => {
        const { rows } = await t.db.pool.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM kl_events WHERE type = 'ApplyCommitted'",
        );
        return rows[0].n === 2;
      });
      await until('a projector waiting for resources', async () => {
        const { rows } = await t.db.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock'
              AND query LIKE '%resources%'`,
        );
        return rows[0].n > 0;
      });

      const { code } = await kld.stop();
      await closed;
      expect(code).toBe(0);
      expect(kld.output()).not.toContain('shutdown took too long');
    } finally {
      if (held) await holder.query('ROLLBACK');
      await holder.end();
      await kld.stop();
    }

    // Ready once every read model has caught up with the log: it projects the
    // big commit first, which took more than startKld's 30 s on a loaded machine.
    const again = await startKld({ KL_DATABASE_URL: t.url }, 90_000);
    try {
      const state = await call(again.url, 'GET', `/v1/states/${STATE}`);
      expect(state.status).toBe(200);
      expect(state.body.serial).toBe(2);
      const instances = state.body.resources[0].instances as { attributes: { id: string } }[];
      expect(instances).toHaveLength(SIZE);
      expect(instances.every((i) => i.attributes.id.endsWith('-refreshed'))).toBe(true);
      const version = await call(again.url, 'GET', `/v1/engine/states/${STATE}`);
      expect([version.status, version.body.version]).toEqual([200, 2]);

      const live = await snapshotTables(t.db, TABLES);
      const rebuild = await call(again.url, 'POST', '/v1/admin/projections/rebuild');
      expect(rebuild.status).toBe(200);
      expect(await snapshotTables(t.db, TABLES)).toEqual(live);
    } finally {
      expect((await again.stop()).code).toBe(0);
    }
  });
});
