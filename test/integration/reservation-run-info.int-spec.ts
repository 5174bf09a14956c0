import { randomUUID } from 'node:crypto';
import { stateStreamId } from '../../src/domain/state/state-stream';
import type { StateEvent } from '../../src/domain/state';
import { loadMigrations, migrate } from '../../src/infrastructure/postgres/migrator';
import { ApplyHarness } from '../support/apply-harness';
import {
  READ_MODEL_TABLES,
  snapshotTables,
  StateHarness,
  testDocument,
} from '../support/state-harness';
import { createEmptyDatabase, quietLogger } from '../support/test-database';

const GLOBS = ['terraform_data.a', 'terraform_data.b', 'terraform_data.c'];

/**
 * A run's info is stored once per run (reservation_run_info) and shown on
 * each of its `resource_reservations` rows, whether the log has it on the
 * run's first ReservationAcquired only (as written now) or on each (as
 * written before wave 19).
 */
describe("resource_reservations: a run's info once per run", () => {
  let h: StateHarness;
  let a: ApplyHarness;
  const info = { state_engine_operation: 'state rm', preview: GLOBS.map((g) => `- ${g}`) };

  beforeAll(async () => {
    h = await StateHarness.create();
    a = new ApplyHarness(h);
    const doc = testDocument(
      1,
      ['a', 'b', 'c'].map((name) => ({ name, input: name })),
    );
    await h.commit('now', doc);
    await h.commit('before', doc);
  });
  afterAll(async () => {
    await h?.close();
  });

  /** Appends events as an older kld wrote them, and waits for the read models. */
  async function appendAsBefore(name: string, events: StateEvent[]): Promise<void> {
    const result = await h.events.appendToStream(
      stateStreamId(name),
      events.map((e) => ({
        eventId: randomUUID(),
        type: e.type,
        schemaVersion: 1,
        data: e.data,
        metadata: {
          actor: 'alice',
          correlationId: 'corr-before',
          causationId: null,
          occurredAt: '2026-01-01T00:10:00.000Z',
        },
      })),
      { expectedRevision: 'stream_exists' },
    );
    await h.runner.waitForPosition(result.position);
  }

  const rows = (name: string) =>
    h.db.query<{ run_id: string; address_glob: string; info: unknown }>(
      `SELECT run_id, address_glob, info FROM resource_reservations
        WHERE state_name = $1 AND kind = 'apply' ORDER BY address_glob`,
      [name],
    );
  const stored = (name: string) =>
    h.db.query<{ run_id: string; info: unknown }>(
      `SELECT i.run_id, i.info FROM reservation_run_info i
         JOIN states s ON s.state_id = i.state_id WHERE s.name = $1`,
      [name],
    );

  it('shows the info on each row and stores it once, for both shapes of the log', async () => {
    const run = await a.start('now', {
      reservations: GLOBS.map((glob) => ({ glob, mode: 'write' as const })),
      writeSet: GLOBS,
      info,
    });
    const stateId = await h.stateId('before');
    await appendAsBefore(
      'before',
      GLOBS.map((glob, i) => ({
        type: 'ReservationAcquired',
        data: {
          stateId,
          reservationId: `before-r${i}`,
          runId: 'run-before',
          glob,
          mode: 'write',
          holder: 'alice',
          info,
          acquiredAt: '2026-01-01T00:10:00.000Z',
          expiresAt: '2026-01-01T00:25:00.000Z',
        },
      })),
    );

    for (const [name, runId] of [
      ['now', run.runId],
      ['before', 'run-before'],
    ]) {
      expect(await rows(name)).toEqual(
        GLOBS.map((glob) => ({ run_id: runId, address_glob: glob, info })),
      );
      expect(await stored(name)).toEqual([{ run_id: runId, info }]);
    }
    // The rows themselves hold no copy of it.
    const copies = await h.db.query(
      "SELECT 1 FROM reservation_holders WHERE kind = 'apply' AND info IS NOT NULL",
    );
    expect(copies).toEqual([]);
    // What the REST API lists: each run's info once, none on its reservations.
    const listed = await a.readModel.reservations(new Date('2026-01-01T00:11:00.000Z'));
    const applies = listed.reservations.filter((r) => r.kind === 'apply');
    expect(applies).toHaveLength(2 * GLOBS.length);
    expect(applies.map((r) => r.info)).toEqual(Array(2 * GLOBS.length).fill(null));
    expect(listed.runs).toEqual(
      expect.arrayContaining([
        { run_id: run.runId, state: 'now', info },
        { run_id: 'run-before', state: 'before', info },
      ]),
    );
    expect(listed.runs).toHaveLength(2);

    // The aggregate loaded from either log tells terraform which operation holds the state.
    for (const name of ['now', 'before']) {
      await expect(h.lock(name, `lock-${name}`)).rejects.toMatchObject({
        code: 'STATE.LOCKED',
        metadata: { holder: expect.objectContaining({ Operation: 'state-engine: state rm' }) },
      });
    }
  });

  it('rebuilds the same rows from the log, then forgets the info with the run', async () => {
    const live = await snapshotTables(h.db, READ_MODEL_TABLES);
    await h.runner.rebuild();
    expect(await snapshotTables(h.db, READ_MODEL_TABLES)).toEqual(live);

    const [{ run_id: runId }] = await rows('now');
    await a.finish('now', runId, 'failed');
    await appendAsBefore('before', [
      {
        type: 'ReservationReleased',
        data: {
          stateId: await h.stateId('before'),
          runId: 'run-before',
          reservationIds: GLOBS.map((_, i) => `before-r${i}`),
          reason: 'aborted',
        },
      },
    ]);
    for (const name of ['now', 'before']) {
      expect(await rows(name)).toEqual([]);
      expect(await stored(name)).toEqual([]);
    }
  });

  it('shows every row of a run of 2,500 globs, its info once, and rebuilds them the same', async () => {
    await h.commit('big', testDocument(1, [{ name: 'a', input: 'a' }]));
    const globs = Array.from({ length: 2500 }, (_, i) => `module.m${i % 7}.terraform_data.x[${i}]`);
    const run = await a.start('big', {
      reservations: globs.map((glob) => ({ glob, mode: 'write' as const })),
      writeSet: globs,
      info,
    });
    const listed = await h.db.query<{ address_glob: string }>(
      `SELECT address_glob FROM resource_reservations
        WHERE state_name = 'big' AND kind = 'apply' AND run_id = $1`,
      [run.runId],
    );
    expect(listed.map((r) => r.address_glob).sort()).toEqual([...globs].sort());
    expect(await stored('big')).toEqual([{ run_id: run.runId, info }]);
    const live = await snapshotTables(h.db, READ_MODEL_TABLES);
    await h.runner.rebuild();
    expect(await snapshotTables(h.db, READ_MODEL_TABLES)).toEqual(live);
    await a.finish('big', run.runId, 'failed');
    expect(await rows('big')).toEqual([]);
  });

  it('moves the rows of a database migrated before (info on each) to the info once', async () => {
    const t = await createEmptyDatabase();
    try {
      const all = loadMigrations();
      await migrate(
        t.url,
        quietLogger,
        all.filter((m) => m.id < 38),
      );
      const stateId = randomUUID();
      await t.db.query(
        `INSERT INTO resource_reservations (state_id, state_name, id, kind, run_id, address_glob,
           mode, holder, info, acquired_at, expires_at)
         SELECT $1::uuid, 'prod', 'r' || g, 'apply', 'run-1', 'terraform_data.x[' || g || ']', 'write',
                'alice', $2::jsonb, now(), now() + interval '15 minutes'
           FROM generate_series(1, 3) g
         UNION ALL
         SELECT $1::uuid, 'prod', 'L1', 'terraform-plan', NULL, '*', 'read', 'bob', $3::jsonb, now(), NULL`,
        [stateId, JSON.stringify(info), JSON.stringify({ ID: 'L1', Who: 'bob' })],
      );
      const before = await t.db.query('SELECT * FROM resource_reservations ORDER BY kind, id');
      await migrate(t.url, quietLogger, all);
      expect(await t.db.query('SELECT * FROM resource_reservations ORDER BY kind, id')).toEqual(
        before,
      );
      expect(await t.db.query('SELECT run_id, info FROM reservation_run_info')).toEqual([
        { run_id: 'run-1', info },
      ]);
    } finally {
      await t.drop();
    }
  });
});
