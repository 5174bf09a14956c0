import { Client } from 'pg';
import type { LogPosition } from '../../src/domain/shared/event';
import { SHADOW_SCHEMA } from '../../src/projections/shadow-tables';
import { LOCK_NAMESPACE } from '../../src/projections/projection-runner';
import {
  READ_MODEL_TABLES,
  snapshotTables,
  StateHarness,
  TestInstance,
  testDocument,
} from '../support/state-harness';

/**
 * The runner's stop ends the work it has under way at once, however long
 * that work would still take (here: a statement that waits on a lock for as
 * long as the test holds it): what it cut rolls back, each projector's rows
 * with its checkpoint, and a runner started afterwards ends where a rebuild
 * of the log does.
 */

// Without the stop's cancel, each wait below runs to its 30 s bound.
jest.setTimeout(120_000);

describe('stopping the projection runner mid-work', () => {
  let h: StateHarness;
  let holder: Client;
  beforeAll(async () => {
    h = await StateHarness.create();
    // The runners of these tests only: the harness's own would apply the same events early.
    await h.runner.stop();
    holder = new Client({ connectionString: h.t.url });
    await holder.connect();
  });
  afterAll(async () => {
    await holder.end();
    await h.close();
  });

  const instances = (n: number, input: string): TestInstance[] =>
    Array.from({ length: n }, (_, i) => ({ name: 'x', key: i, input }));

  /** Resolves once a backend of this database waits for a lock of `kind` ('relation', 'advisory'). */
  async function someoneWaitsOn(kind: string): Promise<void> {
    for (let i = 0; i < 600; i++) {
      const [{ n }] = await h.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a USING (pid)
          WHERE a.datname = current_database() AND NOT l.granted AND l.locktype = $1`,
        [kind],
      );
      if (n > 0) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`nobody waited on a ${kind} lock within 60 s`);
  }

  /** What `work` settled with, or 'still running' when it has not settled within 30 s. */
  function settledWithin(work: Promise<unknown>): Promise<unknown> {
    return Promise.race([
      work.then(
        (value) => ({ value }),
        (err: unknown) => ({ err }),
      ),
      new Promise((r) => setTimeout(() => r('still running'), 30_000).unref()),
    ]);
  }

  const checkpointOf = async (projector: string): Promise<bigint> => {
    const rows = await h.db.query<{ gp: string }>(
      'SELECT global_position AS gp FROM kl_checkpoints WHERE projection = $1',
      [projector],
    );
    return BigInt(rows[0]?.gp ?? 0);
  };

  it("cuts a writer's catch-up of a big commit short; the next runner projects it as a rebuild does", async () => {
    const first = h.newRunner(h.projectors);
    await h.commit('big', testDocument(1, instances(2000, 'a')), {}, first);
    await first.stop();

    const runner = h.newRunner(h.projectors);
    await holder.query('BEGIN; LOCK TABLE resources IN SHARE MODE');
    let position: LogPosition | null;
    let stopped: unknown;
    let caughtUp: unknown;
    try {
      position = await h.append(h.commitCommand('big', testDocument(2, instances(2000, 'b'))));
      const catchUp = runner.waitForPosition(position!);
      catchUp.catch(() => undefined);
      await someoneWaitsOn('relation');
      // Both settle while the lifecycles' batch still could not end.
      stopped = await settledWithin(runner.stop());
      caughtUp = await settledWithin(catchUp);
    } finally {
      await holder.query('ROLLBACK');
    }
    expect(stopped).toEqual({ value: undefined });
    expect(caughtUp).toEqual({ err: expect.any(Error) });
    // Rolled back with its rows: the lifecycles' checkpoint is short of the commit.
    expect(await checkpointOf('state-resource-lifecycles')).toBeLessThan(position!.globalPosition);

    const next = h.newRunner(h.projectors);
    try {
      await next.waitForPosition(position!);
      const live = await snapshotTables(h.db, READ_MODEL_TABLES);
      const current = await h.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM resources WHERE delete_serial IS NULL`,
      );
      expect(current).toEqual([{ n: 2000 }]);
      await next.rebuild();
      expect(await snapshotTables(h.db, READ_MODEL_TABLES)).toEqual(live);
    } finally {
      await next.stop();
    }
  });

  it('cuts a rebuild short: SERVER.UNAVAILABLE, its copies dropped, the live read models kept', async () => {
    const runner = h.newRunner(h.projectors);
    const before = await snapshotTables(h.db, READ_MODEL_TABLES);
    // The first projector's replay waits for this lock (its batches take it: shadowLock).
    const shadowLock = `kl:rebuild:${h.projectors[0].name}`;
    await holder.query('SELECT pg_advisory_lock($1, hashtext($2))', [LOCK_NAMESPACE, shadowLock]);
    let stopped: unknown;
    let rebuilt: unknown;
    try {
      const rebuild = runner.rebuild();
      rebuild.catch(() => undefined);
      await someoneWaitsOn('advisory');
      stopped = await settledWithin(runner.stop());
      rebuilt = await settledWithin(rebuild);
    } finally {
      await holder.query('SELECT pg_advisory_unlock($1, hashtext($2))', [
        LOCK_NAMESPACE,
        shadowLock,
      ]);
    }
    expect(stopped).toEqual({ value: undefined });
    expect(rebuilt).toEqual({ err: expect.objectContaining({ code: 'SERVER.UNAVAILABLE' }) });
    const copies = await h.db.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [
      SHADOW_SCHEMA,
    ]);
    expect(copies).toEqual([]);
    expect(await snapshotTables(h.db, READ_MODEL_TABLES)).toEqual(before);
  });
});
