import { randomUUID } from 'node:crypto';
import { AggregateStore } from '../../src/application/aggregate-store';
import type { EventToAppend } from '../../src/application/ports/event-store.port';
import { WrittenChunks } from '../../src/application/state/written-chunks';
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
import type { StateDocumentV4 } from '../../src/domain/terraform';
import { stateDocumentText } from '../../src/domain/terraform';
import { PostgresEventStore } from '../../src/infrastructure/event-store/postgres-event-store';
import { PostgresSnapshotStore } from '../../src/infrastructure/event-store/postgres-snapshot-store';
import { StateDocumentReadModel } from '../../src/infrastructure/read-models/state-document-read-model';
import type { ProjectionRunner } from '../../src/projections/projection-runner';
import type { Projector } from '../../src/projections/projector';
import { applyProjectors } from '../../src/projections/apply';
import { stateProjectors } from '../../src/projections/state';
import { snapshotTables, StateHarness, testDocument } from '../support/state-harness';

const RAW = 'state-raw';

/** A document of `n` instances: over the early path's threshold from 100 on. */
const manyInstances = (serial: number, n: number, tag: string) =>
  testDocument(
    serial,
    Array.from({ length: n }, (_, i) => ({ name: 'item', key: i, input: `${tag}-${i}` })),
  );

/**
 * A commit of many instances has its raw state (the served document's
 * chunks and manifest) written beside its append, in a transaction that
 * commits only with the append (ProjectionRunner, applyEarly). What the
 * projector keeps in memory of such a batch (the document it builds the
 * next commit on, the chunks a GET takes from memory) counts only once that
 * transaction has committed: a failed append's document is never served,
 * nor built upon.
 */
describe('the raw state written while its append is', () => {
  let h: StateHarness;
  /** Each apply of the raw-state projector: whether its events were still in flight. */
  let applies: { early: boolean; events: number }[];
  let runner: ProjectionRunner;
  /** The projectors of one process (kept in memory across its runners). */
  let projectors: Projector[];
  let documents: StateDocumentReadModel;

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
    // One process: its projectors, the chunks its raw state wrote last, and
    // the read model serving from them.
    const written = new WrittenChunks();
    projectors = [...stateProjectors(h.events, written), ...applyProjectors()];
    const raw = projectors.find((p) => p.name === RAW)!;
    const apply = raw.apply.bind(raw);
    Object.assign(raw, {
      apply: (events: RecordedEvent[], tx: Parameters<Projector['apply']>[1]) => {
        applies.push({
          early: events.every((e) => e.position.globalPosition === 0n),
          events: events.length,
        });
        return apply(events, tx);
      },
    });
    runner = h.newRunner(projectors);
    documents = new StateDocumentReadModel(h.db, { written });
  });
  afterEach(async () => {
    await runner.stop();
  });

  /** The document as served now, and as it must be for `doc`. */
  const expectServed = async (name: string, doc: StateDocumentV4) => {
    expect((await documents.current(name))?.document).toBe(stateDocumentText(doc));
  };

  /** The read models equal what replaying the whole log into empty ones gives. */
  const expectRebuildEqual = async () => {
    const live = await snapshotTables(h.db);
    await runner.rebuild();
    expect(await snapshotTables(h.db)).toEqual(live);
  };

  /** A commit's events after `version` of a state, decided as the aggregate store would. */
  const decided = async (name: string, doc: StateDocumentV4): Promise<EventToAppend[]> => {
    const command = h.commitCommand(name, doc);
    const metadata = metadataFor(command.metadata);
    const state = await h.store.state(stateStreamId(name));
    return stateDecider.decide(command, state).map((e) => ({
      eventId: randomUUID(),
      type: e.type,
      schemaVersion: currentSchemaVersion(e.type),
      data: e.data,
      metadata,
    }));
  };

  it('writes a first commit’s document once, from the events in flight, and serves it', async () => {
    const first = manyInstances(1, 300, 'a');
    await h.commit('early-raw', first, {}, runner);
    // Applied once, before the append committed: the commit and its 300
    // lifecycles (with the creation); the catch-up found it done.
    expect(applies).toEqual([{ early: true, events: 302 }]);
    await expectServed('early-raw', first);
    // The next, small commit builds on the document kept in memory.
    const next = manyInstances(2, 300, 'a');
    next.resources[0].instances[7].attributes = { id: 'changed', input: 'b' };
    await h.commit('early-raw', next, {}, runner);
    expect(applies.slice(1)).toEqual([{ early: false, events: 1 }]);
    await expectServed('early-raw', next);
    await expectRebuildEqual();
  });

  it('never serves nor builds on the document of an append that failed beside it', async () => {
    const first = manyInstances(1, 150, 'b');
    await h.commit('early-failed', first, {}, runner);
    // A second version of 150 changed instances whose append fails at its
    // end (its last event repeats a stored event's id), once the raw
    // state's early transaction has written its chunks.
    const events = await decided('early-failed', manyInstances(2, 150, 'failed'));
    const [stored] = await h.db.query<{ event_id: string }>(
      'SELECT event_id FROM kl_events ORDER BY global_position LIMIT 1',
    );
    events[events.length - 1].eventId = stored.event_id;
    await expect(
      h.events.appendToStream(stateStreamId('early-failed'), events, { expectedRevision: 'any' }),
    ).rejects.toThrow();
    await runner.stop(); // every early transaction has ended
    // The commit, the 150 old lifecycles closed and the 150 new ones opened.
    expect(applies.slice(1)).toEqual([{ early: true, events: 301 }]);
    await expectServed('early-failed', first);
    const [{ n }] = await h.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM raw_state_chunks
        WHERE position('failed-' in convert_from(bytes, 'UTF8')) > 0`,
    );
    expect(n).toBe(0);

    // Another process commits version 2 and projects it itself.
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
    const second = manyInstances(2, 150, 'b');
    second.resources[0].instances[3].attributes = { id: 'other', input: 'other' };
    const command = h.commitCommand('early-failed', second);
    const { position } = await otherStore.handle(
      stateStreamId('early-failed'),
      command,
      command.metadata,
    );
    const other = h.newRunner([...stateProjectors(elsewhere), ...applyProjectors()]);
    try {
      await other.waitForPosition(position!);
    } finally {
      await other.stop();
    }

    // This process's next commit, a small one, is applied on version 2 as
    // stored, not on the failed append's document (which was version 2
    // too, and whose row version the write would have found).
    runner = h.newRunner(projectors);
    const third = manyInstances(3, 150, 'b');
    third.resources[0].instances[3].attributes = { id: 'other', input: 'other' };
    third.resources[0].instances[9].attributes = { id: 'third', input: 'third' };
    await h.commit('early-failed', third, {}, runner);
    await expectServed('early-failed', third);
    await expectRebuildEqual();
  });
});
