import { randomUUID } from 'node:crypto';
import { EventFeed } from '../../src/application/events/event-feed';
import { EventFilter } from '../../src/application/events/event-filter';
import { Upcasters } from '../../src/domain/shared/upcasting';
import { PostgresEventStore } from '../../src/infrastructure/event-store/postgres-event-store';
import { Notifier } from '../../src/infrastructure/postgres/notifier';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/**
 * An event written at an older schema version is read, and delivered to
 * feed consumers, in its type's current shape; the log keeps what was written.
 */
describe('upcasting on read', () => {
  let t: TestDatabase;
  let notifier: Notifier;

  beforeAll(async () => {
    t = await createTestDatabase();
    notifier = new Notifier(t.url);
  });
  afterAll(async () => {
    await notifier?.close();
    await t?.drop();
  });

  it('delivers a version-1 event as version 2 through the store and the feed', async () => {
    // Version 2 of LockNoted renamed `who` to `holder`.
    const upcasters = new Upcasters([
      { type: 'LockNoted', from: 1, upcast: (d) => ({ holder: (d as { who: string }).who }) },
    ]);
    const written = new PostgresEventStore(t.db, notifier, new Upcasters([]));
    const store = new PostgresEventStore(t.db, notifier, upcasters);
    const stream = `notes-${randomUUID()}`;
    const metadata = {
      actor: 'old-kld',
      correlationId: randomUUID(),
      causationId: null,
      occurredAt: '2025-01-01T00:00:00.000Z',
    };
    await written.appendToStream(
      stream,
      [
        {
          eventId: randomUUID(),
          type: 'LockNoted',
          schemaVersion: 1,
          data: { who: 'alice' },
          metadata,
        },
        {
          eventId: randomUUID(),
          type: 'LockNoted',
          schemaVersion: 2,
          data: { holder: 'bob' },
          metadata,
        },
      ],
      { expectedRevision: 'no_stream' },
    );
    const shapes = (events: { schemaVersion: number; data: unknown }[]) =>
      events.map((e) => [e.schemaVersion, e.data]);
    const current = [
      [2, { holder: 'alice' }],
      [2, { holder: 'bob' }],
    ];

    expect(shapes(await store.readStream(stream))).toEqual(current);
    // The log still holds what was written.
    expect(shapes(await written.readStream(stream))).toEqual([
      [1, { who: 'alice' }],
      [2, { holder: 'bob' }],
    ]);

    // Followed until both arrive: a read that ends at once stops at the log's horizon, which
    // another test file's open transaction on the same cluster may hold back for a while.
    const feed = new EventFeed(store);
    const abort = new AbortController();
    const giveUp = setTimeout(() => abort.abort(), 30_000);
    const delivered: { schemaVersion: number; data: unknown }[] = [];
    for await (const item of await feed.open(
      { from: 'start', filter: EventFilter.compile({}), follow: true },
      abort.signal,
    )) {
      if (item.kind === 'event' && item.event.streamId === stream) delivered.push(item.event);
      if (delivered.length === current.length) break;
    }
    clearTimeout(giveUp);
    await feed.close();
    expect(shapes(delivered)).toEqual(current);
  });
});
