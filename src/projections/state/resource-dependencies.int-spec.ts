import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { snapshotTables, StateHarness, testDocument } from '../../../test/support/state-harness';

const LIFECYCLES = 'state-resource-lifecycles';
const DEPENDENCIES = 'state-resource-dependencies';

describe('resource_dependencies, a projector of its own (migration 034)', () => {
  let h: StateHarness;
  beforeAll(async () => {
    h = await StateHarness.create();
  });
  afterAll(async () => {
    await h.close();
  });

  const checkpoint = async (projection: string) =>
    (
      await h.db.query<{ at: string }>(
        `SELECT transaction_id::text || '/' || global_position AS at FROM kl_checkpoints
          WHERE projection = $1`,
        [projection],
      )
    ).map((r) => r.at);

  const skips = async (projection: string) =>
    (
      await h.db.query<{ global_position: string; reason: string }>(
        `SELECT global_position::text, reason FROM kl_projection_skips
          WHERE projection = $1 ORDER BY global_position`,
        [projection],
      )
    ).map((r) => `${r.global_position}: ${r.reason}`);

  const liveEdges = async () =>
    (
      await h.db.query<{ edge: string }>(
        `SELECT from_address || ' -> ' || to_address AS edge FROM resource_dependencies
          WHERE delete_version IS NULL ORDER BY 1`,
      )
    ).map((r) => r.edge);

  it('continues where the lifecycles projector was, with its skips, and projects the same edges', async () => {
    await h.commit(
      'deps',
      testDocument(1, [
        { name: 'hub', input: 'a' },
        { name: 'web', key: 0, input: 'b', dependsOn: ['terraform_data.hub'] },
        { name: 'web', key: 1, input: 'c', dependsOn: ['terraform_data.hub'] },
      ]),
    );
    // A database projected before the split: one projector held both tables
    // and its checkpoint; an operator had skipped an event for it.
    await h.db.query('DELETE FROM kl_checkpoints WHERE projection = $1', [DEPENDENCIES]);
    await h.db.query(
      `INSERT INTO kl_projection_skips (projection, global_position, reason)
       VALUES ($1, 999999, 'name longer than an index entry')`,
      [LIFECYCLES],
    );
    const migration = readFileSync(
      join(__dirname, '../../../migrations/034_resource_dependencies_projector.sql'),
      'utf8',
    );
    await h.db.query(migration);
    expect(await checkpoint(DEPENDENCIES)).toEqual(await checkpoint(LIFECYCLES));
    expect(await checkpoint(DEPENDENCIES)).toHaveLength(1);
    expect(await skips(DEPENDENCIES)).toEqual(['999999: name longer than an index entry']);
    await h.db.query('DELETE FROM kl_projection_skips WHERE global_position = 999999');

    // The next commit: web[1] replaced (a close and an open), db added.
    await h.commit(
      'deps',
      testDocument(2, [
        { name: 'hub', input: 'a' },
        { name: 'web', key: 0, input: 'b', dependsOn: ['terraform_data.hub'] },
        { name: 'web', key: 1, input: 'changed', dependsOn: ['terraform_data.hub'] },
        { name: 'db', input: 'd', dependsOn: ['terraform_data.hub', 'terraform_data.web'] },
      ]),
    );
    expect(await liveEdges()).toEqual([
      'terraform_data.db -> terraform_data.hub',
      'terraform_data.db -> terraform_data.web',
      'terraform_data.web[0] -> terraform_data.hub',
      'terraform_data.web[1] -> terraform_data.hub',
    ]);
    // Every lifecycle's edges, closed with it: what a rebuild from the log writes.
    const live = await snapshotTables(h.db, ['resource_dependencies', 'resources']);
    expect(live.resource_dependencies).toHaveLength(5);
    await h.runner.rebuild();
    expect(await snapshotTables(h.db, ['resource_dependencies', 'resources'])).toEqual(live);
  });
});
