import { randomUUID } from 'node:crypto';
import type { PoolClient } from 'pg';
import { AggregateStore } from '../../src/application/aggregate-store';
import type { EventToAppend } from '../../src/application/ports/event-store.port';
import { WrongExpectedRevisionError } from '../../src/domain/shared/concurrency-error';
import type { RecordedEvent } from '../../src/domain/shared/event';
import { metadataFor } from '../../src/domain/shared/event';
import { currentSchemaVersion } from '../../src/domain/shared/upcasting';
import {
  fromSnapshot,
  STATE_SNAPSHOT_SCHEMA,
  stateDecider,
  stateStreamId,
  toSnapshot,
} from '../../src/domain/state';
import { PostgresEventStore } from '../../src/infrastructure/event-store/postgres-event-store';
import { PostgresSnapshotStore } from '../../src/infrastructure/event-store/postgres-snapshot-store';
import { LOCK_NAMESPACE, ProjectionRunner } from '../../src/projections/projection-runner';
import type { Projector } from '../../src/projections/projector';
import { applyProjectors } from '../../src/projections/apply';
import { stateProjectors } from '../../src/projections/state';
import { snapshotTables, StateHarness, testDocument } from '../support/state-harness';

const LIFECYCLES = 'state-resource-lifecycles';

/** A document of `n` instances: over the lifecycles' COPY threshold from 100 on. */
const manyInstances = (serial: number, n: number, tag: string) =>
  testDocument(
    serial,
    Array.from({ length: n }, (_, i) => ({ name: 'item', key: i, input: `${tag}-${i}` })),
  );

/**
 * A first commit's lifecycles are written beside its append, in a
 * transaction that commits only when the append has and its events are
 * the lifecycles' next (ProjectionRunner, applyEarly). Whatever else
 * happens (another process's events first, an append refused or failing, no
 * connection to spare), the rows are exactly the log's, and a refused or
 * failed append leaves none.
 */
describe('the lifecycles applied while their append is written', () => {
  let h: StateHarness;
  /** Each apply of the lifecycles projector: whether its events were still in flight (no position). */
  let applies: { early: boolean; events: number }[];
  let runner: ProjectionRunner;

  beforeAll(async () => {
    h = await StateHarness.create();
    // The harness's own runner watches the same appends: only this spec's does.
    await h.runner.stop();
  });
  afterAll(async () => {
    await runner?.stop();
    await h.close();
  });

  beforeEach(() => {
    applies = [];
    const projectors = [...stateProjectors(h.events), ...applyProjectors()];
    const lifecycles = projectors.find((p) => p.name === LIFECYCLES)!;
    const apply = lifecycles.apply.bind(lifecycles);
    Object.assign(lifecycles, {
      apply: (events: RecordedEvent[], tx: Parameters<Projector['apply']>[1]) => {
        applies.push({
          early: events.every((e) => e.position.globalPosition === 0n),
          events: events.length,
        });
        return apply(events, tx);
      },
    });
    runner = h.newRunner(projectors);
  });
  afterEach(async () => {
    await runner.stop();
  });

  const liveRows = async (name: string) =>
    (
      await h.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM resources r JOIN states s USING (state_id)
          WHERE s.name = $1 AND r.delete_version IS NULL`,
        [name],
      )
    )[0].n;

  const checkpoint = async () =>
    (
      await h.db.query<{ gp: string }>(
        'SELECT global_position::text AS gp FROM kl_checkpoints WHERE projection = $1',
        [LIFECYCLES],
      )
    )[0]?.gp;

  /** The read models equal what replaying the whole log into empty ones gives. */
  const expectRebuildEqual = async () => {
    const live = await snapshotTables(h.db);
    await runner.rebuild();
    expect(await snapshotTables(h.db)).toEqual(live);
  };

  it('writes a first commit’s lifecycles once, before the append commits, and answers with them', async () => {
    await h.commit('early-first', manyInstances(1, 300, 'a'), {}, runner);
    // One apply, of the events still in flight; the writer's catch-up found
    // the lifecycles there and applied nothing more.
    expect(applies).toEqual([{ early: true, events: 301 }]);
    expect(await liveRows('early-first')).toBe(300);
    const [last] = await h.db.query<{ gp: string }>(
      'SELECT max(global_position)::text AS gp FROM kl_events',
    );
    expect(await checkpoint()).toBe(last.gp);
    // A small commit keeps today's path: applied after its append.
    const next = manyInstances(2, 300, 'a');
    next.resources[0].instances[5].attributes = { id: 'changed', input: 'b' };
    await h.commit('early-first', next, {}, runner);
    expect(applies.slice(1)).toEqual([{ early: false, events: 3 }]);
    await expectRebuildEqual();
  });

  it('rolls back when another process’s events lie between its checkpoint and the append', async () => {
    // Another process commits a small state; nobody projects it yet.
    const elsewhere = new PostgresEventStore(h.db, h.notifier, undefined, 0);
    const otherStore = new AggregateStore(
      elsewhere,
      new PostgresSnapshotStore(h.db),
      stateDecider,
      {
        ids: { uuid: randomUUID },
        snapshotSchema: STATE_SNAPSHOT_SCHEMA,
        toSnapshot,
        fromSnapshot,
      },
    );
    const command = h.commitCommand('elsewhere', manyInstances(1, 3, 'x'));
    await otherStore.handle(stateStreamId('elsewhere'), command, command.metadata);
    await h.commit('early-second', manyInstances(1, 250, 'c'), {}, runner);
    // Tried early (and rolled back: the other commit's lifecycles come
    // first), then applied by the catch-up together with the other commit.
    expect(applies[0]).toEqual({ early: true, events: 251 });
    expect(applies.slice(1)).toEqual([{ early: false, events: 4 + 251 }]);
    expect(await liveRows('elsewhere')).toBe(3);
    expect(await liveRows('early-second')).toBe(250);
    await expectRebuildEqual();
  });

  /** A first commit's events for a new state, decided as the aggregate store would. */
  const decided = (name: string, n: number): EventToAppend[] => {
    const command = h.commitCommand(name, manyInstances(1, n, name));
    const metadata = metadataFor(command.metadata);
    return stateDecider.decide(command, stateDecider.initialState()).map((e) => ({
      eventId: randomUUID(),
      type: e.type,
      schemaVersion: currentSchemaVersion(e.type),
      data: e.data,
      metadata,
    }));
  };

  it('leaves no row of an append refused for its expected revision', async () => {
    const before = await checkpoint();
    await expect(
      h.events.appendToStream(stateStreamId('refused'), decided('refused', 200), {
        expectedRevision: 4n,
      }),
    ).rejects.toBeInstanceOf(WrongExpectedRevisionError);
    await runner.stop(); // every early transaction has ended
    expect(await liveRows('refused')).toBe(0);
    const [{ n }] = await h.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM resources WHERE address LIKE 'terraform_data.item%'
          AND attributes->'input'->>'value' LIKE 'refused-%'`,
    );
    expect(n).toBe(0);
    expect(await checkpoint()).toBe(before);
  });

  it('rolls back the rows it wrote when the append fails after they were sent', async () => {
    const before = await checkpoint();
    const events = decided('failing', 200);
    // The last event repeats a stored event's id: the append's COPY fails
    // at its end, once the early transaction has begun.
    const [stored] = await h.db.query<{ event_id: string }>(
      'SELECT event_id FROM kl_events ORDER BY global_position LIMIT 1',
    );
    events[events.length - 1].eventId = stored.event_id;
    await expect(
      h.events.appendToStream(stateStreamId('failing'), events, { expectedRevision: 'no_stream' }),
    ).rejects.toThrow();
    await runner.stop();
    expect(applies).toEqual([{ early: true, events: 201 }]);
    const [{ n }] = await h.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM resources WHERE attributes->'input'->>'value' LIKE 'failing-%'`,
    );
    expect(n).toBe(0);
    expect(await checkpoint()).toBe(before);
  });

  it('lets go of its lock, never waiting for it, when another session holds it through the append', async () => {
    const holder = await h.db.pool.connect();
    let position;
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [
        LOCK_NAMESPACE,
        LIFECYCLES,
      ]);
      position = await h.append(h.commitCommand('lock-taken', manyInstances(1, 150, 'l')));
      await new Promise((r) => setTimeout(r, 300)); // longer than the early one tries
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
    await runner.waitForPosition(position!);
    expect(applies).toEqual([{ early: false, events: 151 }]);
    expect(await liveRows('lock-taken')).toBe(150);
  });

  it('goes today’s way, without waiting, when the pool has no connection to spare', async () => {
    const pool = h.db.pool;
    const max = pool.options.max!;
    // Every connection but the one the append takes is busy.
    const busy: PoolClient[] = [];
    while (pool.totalCount < max - 1 || pool.idleCount > 0) busy.push(await pool.connect());
    let position;
    try {
      position = await h.append(h.commitCommand('no-spare', manyInstances(1, 150, 'n')));
    } finally {
      for (const c of busy) c.release();
    }
    await runner.waitForPosition(position!);
    expect(applies).toEqual([{ early: false, events: 151 }]);
    expect(await liveRows('no-spare')).toBe(150);
    await expectRebuildEqual();
  });
});
