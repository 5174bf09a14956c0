import { PostgresSnapshotStore } from '../../src/infrastructure/event-store/postgres-snapshot-store';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/** A big snapshot's write waits for a quiet moment, so other callers do not share the cores with it. */
describe('snapshot writes beside other callers', () => {
  let t: TestDatabase;
  beforeAll(async () => (t = await createTestDatabase()));
  afterAll(async () => t.drop());

  const stored = async (streamId: string) =>
    (
      await t.db.query<{ revision: string }>(
        'SELECT revision FROM kl_snapshots WHERE stream_id = $1',
        [streamId],
      )
    ).map((r) => r.revision);
  const snapshot = { revision: 7n, schema: 'counter/1', json: '{"total":7}' };

  it('writes the snapshot once the statements in flight have ended', async () => {
    let busy = true;
    const store = new PostgresSnapshotStore(t.db, { othersBusy: () => busy, maxWaitMs: 60_000 });
    let saved = false;
    const saving = store.save('s-1', snapshot).then(() => (saved = true));

    await new Promise((r) => setTimeout(r, 300));
    expect(saved).toBe(false);
    expect(await stored('s-1')).toEqual([]);

    busy = false;
    await saving;
    expect(await stored('s-1')).toEqual(['7']);
    expect((await store.load('s-1'))?.state).toEqual({ total: 7 });
  });

  it('writes it anyway when the others never stop', async () => {
    const store = new PostgresSnapshotStore(t.db, { othersBusy: () => true, maxWaitMs: 100 });
    await store.save('s-2', snapshot);
    expect(await stored('s-2')).toEqual(['7']);
  });

  it("counts kld's own pool busy while a statement runs or waits, and idle after", async () => {
    expect(t.db.busy()).toBe(false);
    const running = t.db.query('SELECT pg_sleep(0.2)');
    expect(t.db.busy()).toBe(true);
    await running;
    expect(t.db.busy()).toBe(false);
  });
});
