import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { EventFeed, FeedItem, FeedRequest } from '../../src/application/events/event-feed';
import { EventFilter } from '../../src/application/events/event-filter';
import type { EventToAppend } from '../../src/application/ports/event-store.port';
import { DomainError } from '../../src/domain/shared/domain-error';
import type { LogPosition, RecordedEvent } from '../../src/domain/shared/event';
import { formatCursor, parseCursor } from '../../src/domain/shared/log-cursor';
import { Notifier } from '../../src/infrastructure/postgres/notifier';
import { PostgresEventStore } from '../../src/infrastructure/event-store/postgres-event-store';
import { expectAlike } from '../support/expect-alike';
import { createTestDatabase, TestDatabase } from '../support/test-database';

const meta = (actor = 'writer') => ({
  actor,
  correlationId: randomUUID(),
  causationId: null,
  occurredAt: '2026-01-01T00:00:00.000Z',
});

function events(n: number, type: string, data: (i: number) => unknown): EventToAppend[] {
  return Array.from({ length: n }, (_, i) => ({
    eventId: randomUUID(),
    type,
    schemaVersion: 1,
    data: data(i),
    metadata: meta(),
  }));
}

/** Collects a feed's items in the background until `until` says stop (or the signal aborts). */
function collect(
  feed: AsyncIterable<FeedItem>,
  until: (items: FeedItem[]) => boolean = () => false,
): { items: FeedItem[]; done: Promise<void> } {
  const items: FeedItem[] = [];
  const done = (async () => {
    for await (const item of feed) {
      items.push(item);
      if (until(items)) return;
    }
  })();
  return { items, done };
}

const eventsOf = (items: FeedItem[]): RecordedEvent[] =>
  items.flatMap((i) => (i.kind === 'event' ? [i.event] : i.kind === 'events' ? i.events : []));

async function waitFor(what: string, ok: () => boolean, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('EventFeed on the PostgreSQL event store', () => {
  let t: TestDatabase;
  let notifier: Notifier;
  let store: PostgresEventStore;
  const aborts: AbortController[] = [];
  const signal = () => {
    const a = new AbortController();
    aborts.push(a);
    return a.signal;
  };

  beforeAll(async () => {
    t = await createTestDatabase();
    notifier = new Notifier(t.url);
    store = new PostgresEventStore(t.db, notifier);
  });
  afterEach(() => {
    for (const a of aborts.splice(0)) a.abort();
  });
  afterAll(async () => {
    await notifier.close();
    await t.drop();
  });

  /** `SELECT cursor, event_id FROM event_log ORDER BY cursor`: the log as `kl query` lists it. */
  async function logOrder(): Promise<string[]> {
    const rows = await t.db.query<{ cursor: string; event_id: string }>(
      'SELECT cursor, event_id FROM event_log ORDER BY cursor',
    );
    return rows.map((r) => `${r.cursor} ${r.event_id}`);
  }
  const listed = (es: RecordedEvent[]) => es.map((e) => `${formatCursor(e.position)} ${e.eventId}`);

  async function read(feed: EventFeed, request: Partial<FeedRequest> = {}): Promise<FeedItem[]> {
    const items: FeedItem[] = [];
    const it = await feed.open(
      { from: 'start', filter: EventFilter.compile(), follow: false, ...request },
      signal(),
    );
    for await (const item of it) items.push(item);
    return items;
  }

  it('delivers 100,000 events of 16 concurrent writers once each, in log order, past a late commit and a rollback', async () => {
    const feed = new EventFeed(store);
    const live = collect(
      await feed.open({ from: 'end', filter: EventFilter.compile(), follow: true }, signal()),
      (items) => items.length === 100_002, // caught-up, then the events
    );
    // The same, in batches of up to 500 events.
    const batched = collect(
      await feed.open(
        { from: 'end', filter: EventFilter.compile(), follow: true, batch: 500 },
        signal(),
      ),
      (items) => eventsOf(items).length === 100_001,
    );
    await waitFor(
      'the live subscribers to catch up',
      () =>
        live.items.some((i) => i.kind === 'caught-up') &&
        batched.items.some((i) => i.kind === 'caught-up'),
    );

    // Two writers take their transaction ids first and hold them open.
    const late = new Client({ connectionString: t.url });
    const doomed = new Client({ connectionString: t.url });
    await late.connect();
    await doomed.connect();
    const insert = (name: string) =>
      `INSERT INTO kl_events (event_id, stream_id, stream_revision, type, schema_version, data, metadata)
       VALUES (gen_random_uuid(), 'state-${name}', 0, 'StateCreated', 1,
               '{"stateId":"${name}","name":"${name}"}', '{"actor":"held"}')`;
    try {
      await late.query('BEGIN');
      await late.query(insert('late'));
      await doomed.query('BEGIN');
      await doomed.query(insert('doomed'));

      await Promise.all(
        Array.from({ length: 16 }, async (_, w) => {
          let expected: bigint | 'no_stream' = 'no_stream';
          for (let batch = 0; batch < 25; batch++) {
            const r = await store.appendToStream(
              `state-writer-${w}`,
              events(250, 'LockAcquired', (i) => ({ w, n: batch * 250 + i })),
              { expectedRevision: expected },
            );
            expected = r.nextExpectedRevision;
          }
        }),
      );
      // Everything the writers committed sorts after the open transactions:
      // nobody may see it yet.
      await new Promise((r) => setTimeout(r, 600));
      expect(eventsOf(live.items)).toHaveLength(0);
      expect(eventsOf(batched.items)).toHaveLength(0);
      await doomed.query('ROLLBACK');
      await new Promise((r) => setTimeout(r, 400));
      expect(eventsOf(live.items)).toHaveLength(0);
      expect(eventsOf(batched.items)).toHaveLength(0);
      await late.query('COMMIT');
    } finally {
      await late.end();
      await doomed.end();
    }

    await Promise.all([live.done, batched.done]);
    const delivered = eventsOf(live.items);
    const log = await logOrder();
    expect(log).toHaveLength(100_001);
    expectAlike(listed(delivered), log);
    expectAlike(listed(eventsOf(batched.items)), log);
    // Only batches after the marker, none empty or over the size asked for.
    const batches = batched.items.slice(1);
    expect(batched.items[0].kind).toBe('caught-up');
    for (const b of batches) {
      expect(b.kind).toBe('events');
      if (b.kind === 'events') expect(b.events.length).toBeGreaterThan(0);
      if (b.kind === 'events') expect(b.events.length).toBeLessThanOrEqual(500);
    }
    expect(delivered[0].streamId).toBe('state-late');
    expect(delivered.some((e) => e.streamId === 'state-doomed')).toBe(false);
    // Each writer's events in its own order.
    for (let w = 0; w < 16; w++) {
      const mine = delivered.filter((e) => e.streamId === `state-writer-${w}`);
      expectAlike(
        mine.map((e) => Number(e.streamRevision)),
        Array.from({ length: 6250 }, (_, i) => i),
      );
    }

    // A catch-up reader from the start gets the same, and ends at the head.
    const replay = await read(feed);
    expectAlike(listed(eventsOf(replay)), log);
    expect(replay.at(-1)).toEqual({ kind: 'caught-up', position: delivered.at(-1)!.position });
    // Restarted from a saved position: exactly the rest.
    const saved = formatCursor(delivered[49_999].position);
    const rest = await read(feed, { from: parseCursor(saved) });
    expectAlike(listed(eventsOf(rest)), log.slice(50_000));
    // Batched, the same: from the start, and from a position inside a batch
    // (pages of 1,000 events go out as 300 + 300 + 300 + 100: the 49,150th
    // event is the 150th of a batch).
    const replayed = await read(feed, { batch: 300 });
    expectAlike(listed(eventsOf(replayed)), log);
    expect(replayed.at(-1)).toEqual({ kind: 'caught-up', position: delivered.at(-1)!.position });
    expect(replayed.filter((i) => i.kind === 'events').map((i) => eventsOf([i]).length)).toEqual(
      expect.arrayContaining([300, 100]),
    );
    const inside = formatCursor(delivered[49_149].position);
    const restBatched = await read(feed, { from: parseCursor(inside), batch: 300 });
    expectAlike(listed(eventsOf(restBatched)), log.slice(49_150));
    expect(restBatched.at(-1)).toEqual(replay.at(-1));
  }, 300_000);

  /**
   * A live consumer that stops reading while `appends` batches of events are
   * written (batch `i` from `data(i, n)`): once the tail has dropped it, it
   * reads on and gets every event, as `n`s in order.
   */
  async function stalledConsumer(
    feed: EventFeed,
    options: { batch?: number; appends: number; perAppend: number },
    data: (i: number, n: number) => object,
  ): Promise<number[]> {
    const it = (
      await feed.open(
        { from: 'end', filter: EventFilter.compile(), follow: true, batch: options.batch },
        signal(),
      )
    )[Symbol.asyncIterator]();
    expect((await it.next()).value).toMatchObject({ kind: 'caught-up' });
    // Live now, but not reading: the writers go on.
    const pending = it.next();
    const stream = `state-stalled-${randomUUID()}`;
    let expected: bigint | 'no_stream' = 'no_stream';
    for (let i = 0; i < options.appends; i++) {
      const r = await store.appendToStream(
        stream,
        events(options.perAppend, 'LockAcquired', (n) => data(i, n)),
        { expectedRevision: expected },
      );
      expected = r.nextExpectedRevision;
    }
    const total = options.appends * options.perAppend;
    const got: RecordedEvent[] = [];
    got.push(...eventsOf([(await pending).value as FeedItem]));
    await waitFor('the tail to drop the full buffer', () => feed.stats().live === 0);
    while (got.length < total) {
      const { value } = await it.next();
      got.push(...eventsOf([value as FeedItem]));
    }
    await it.return?.();
    return got.map((e) => (e.data as { n: number }).n);
  }

  it.each([1, 40])(
    'sends a slow consumer back to the log when its buffer fills, and it misses nothing (batch %i)',
    async (batch) => {
      const feed = new EventFeed(store, { liveBuffer: 100, pageSize: 50 });
      const ns = await stalledConsumer(feed, { batch, appends: 30, perAppend: 100 }, (i, n) => ({
        n: i * 100 + n,
      }));
      expect(ns).toEqual(Array.from({ length: 3000 }, (_, i) => i));
      expect(feed.stats().fellBehind).toBeGreaterThanOrEqual(1);
      expect(feed.stats().maxBuffered).toBeLessThanOrEqual(100);
    },
  );

  it('sends a consumer that stops reading back to the log once its buffer holds too many bytes, however few events', async () => {
    // Count alone would let a stalled consumer pin 10,000 big events.
    const feed = new EventFeed(store, { liveBufferBytes: 256 * 1024, pageSize: 50 });
    const blob = 'x'.repeat(64 * 1024);
    const ns = await stalledConsumer(feed, { appends: 40, perAppend: 1 }, (i) => ({ n: i, blob }));
    expect(ns).toEqual(Array.from({ length: 40 }, (_, i) => i));
    expect(feed.stats().fellBehind).toBeGreaterThanOrEqual(1);
    expect(feed.stats().maxBufferedBytes).toBeLessThanOrEqual(256 * 1024);
  });

  describe('filters', () => {
    const run = randomUUID();
    const team = `team${run.slice(0, 8)}`;
    let afterStart: LogPosition;
    let head: LogPosition;

    beforeAll(async () => {
      const created = (name: string) =>
        events(1, 'StateCreated', () => ({ stateId: randomUUID(), name }));
      await store.appendToStream(`state-${team}/a`, created(`${team}/a`), {
        expectedRevision: 'no_stream',
      });
      await store.appendToStream(`state-other${run}`, created(`other${run}`), {
        expectedRevision: 'no_stream',
      });
      const started = await store.appendToStream(
        `refresh-${run}`,
        events(1, 'RefreshStarted', () => ({ runId: run, stateName: `${team}/a` })),
        { expectedRevision: 'no_stream' },
      );
      afterStart = started.position;
      await store.appendToStream(
        `refresh-${run}`,
        [
          ...events(2, 'ResourceRefreshed', (i) => ({ runId: run, address: `a.b[${i}]` })),
          ...events(1, 'RefreshFinished', () => ({ runId: run })),
        ],
        { expectedRevision: 0n },
      );
      head = (
        await store.appendToStream(
          `state-other${run}`,
          events(1, 'StateDeleted', () => ({})),
          {
            expectedRevision: 0n,
          },
        )
      ).position;
    });

    const types = (items: FeedItem[]) => eventsOf(items).map((e) => `${e.streamId} ${e.type}`);

    it('by state glob: the state stream and the runs that name the state, even from mid-run', async () => {
      const feed = new EventFeed(store);
      const filter = EventFilter.compile({ states: [`${team}/*`] });
      expect(types(await read(feed, { filter }))).toEqual([
        `state-${team}/a StateCreated`,
        `refresh-${run} RefreshStarted`,
        `refresh-${run} ResourceRefreshed`,
        `refresh-${run} ResourceRefreshed`,
        `refresh-${run} RefreshFinished`,
      ]);
      // Batched: the same events, in batches of the matching ones only.
      const batched = await read(feed, { filter, batch: 2 });
      expect(types(batched)).toEqual(types(await read(feed, { filter })));
      // Checkpoints may come while catching up (the log holds thousands of other events).
      const items = batched.filter((i) => i.kind !== 'checkpoint');
      expect(items.at(-1)!.kind).toBe('caught-up');
      for (const item of items.slice(0, -1)) {
        expect(item.kind).toBe('events');
        expect(eventsOf([item]).length).toBeGreaterThan(0);
        expect(eventsOf([item]).length).toBeLessThanOrEqual(2);
      }
      expect(items.length).toBeLessThan(5 + 1);
      // A fresh feed knows nothing of the run: it asks the run's first event.
      const fresh = new EventFeed(store);
      expect(types(await read(fresh, { filter, from: afterStart }))).toEqual([
        `refresh-${run} ResourceRefreshed`,
        `refresh-${run} ResourceRefreshed`,
        `refresh-${run} RefreshFinished`,
      ]);
    });

    it('by type and stream prefix, and a caller may be kept to its states', async () => {
      const feed = new EventFeed(store);
      const byType = EventFilter.compile({ types: ['RefreshFinished', 'StateDeleted'] });
      expect(types(await read(feed, { filter: byType, from: afterStart }))).toEqual([
        `refresh-${run} RefreshFinished`,
        `state-other${run} StateDeleted`,
      ]);
      const byPrefix = EventFilter.compile({ streamPrefixes: [`state-${team}/`, 'refresh-'] });
      expect(types(await read(feed, { filter: byPrefix, from: afterStart }))).toEqual([
        `refresh-${run} ResourceRefreshed`,
        `refresh-${run} ResourceRefreshed`,
        `refresh-${run} RefreshFinished`,
      ]);
      const onlyOther = EventFilter.compile({}, (state) => state === `other${run}`);
      expect(types(await read(feed, { filter: onlyOther }))).toEqual([
        `state-other${run} StateCreated`,
        `state-other${run} StateDeleted`,
      ]);
    });

    it('a read that matches nothing still ends with the position it reached', async () => {
      const feed = new EventFeed(store);
      const items = await read(feed, {
        filter: EventFilter.compile({ types: ['LifecycleClosed'] }),
        from: afterStart,
      });
      expect(items).toEqual([{ kind: 'caught-up', position: head }]);
    });

    it('a filtered live subscription sends checkpoints while nothing matches', async () => {
      const feed = new EventFeed(store);
      const live = collect(
        await feed.open(
          {
            from: 'end',
            filter: EventFilter.compile({ types: ['LifecycleClosed'] }),
            follow: true,
            checkpointEveryMs: 100,
          },
          signal(),
        ),
      );
      let last: LogPosition | null = null;
      await waitFor('caught up', () => live.items.length > 0);
      for (let i = 0; i < 3; i++) {
        ({ position: last } = await store.appendToStream(
          `state-quiet${run}`,
          events(1, 'LockAcquired', () => ({ i })),
          { expectedRevision: 'any' },
        ));
      }
      const lastText = formatCursor(last!);
      await waitFor('a checkpoint at the last event', () =>
        live.items.some((i) => i.kind === 'checkpoint' && formatCursor(i.position) === lastText),
      );
      expect(live.items[0].kind).toBe('caught-up');
      expect(live.items.slice(1).every((i) => i.kind === 'checkpoint')).toBe(true);
    });
  });

  it('refuses what names nothing: a malformed cursor, a position of another log, unknown filters', async () => {
    const feed = new EventFeed(store);
    const codeOf = async (f: () => unknown) => {
      try {
        await f();
      } catch (err) {
        expect(err).toBeInstanceOf(DomainError);
        return `${(err as DomainError).code}: ${(err as DomainError).message}`;
      }
      throw new Error('accepted');
    };
    expect(await codeOf(() => parseCursor('12'))).toMatch(/^EVENTS.INVALID_POSITION: "12" is not/);
    const elsewhere = parseCursor(`${'0'.repeat(12)}0fff-${'0'.repeat(10)}ffffff`);
    expect(
      await codeOf(() =>
        feed.open({ from: elsewhere, filter: EventFilter.compile(), follow: true }, signal()),
      ),
    ).toMatch(
      /^EVENTS.INVALID_POSITION: position 0000000000000fff-0000000000ffffff is not in this log/,
    );
    expect(await codeOf(() => EventFilter.compile({ types: ['StateCreatd'] }))).toMatch(
      /^EVENTS.INVALID_FILTER: unknown event type "StateCreatd" \(known: StateCreated, /,
    );
    expect(await codeOf(() => EventFilter.compile({ streamPrefixes: ['nope-'] }))).toMatch(
      /^EVENTS.INVALID_FILTER: stream prefix "nope-" matches no stream/,
    );
    expect(await codeOf(() => EventFilter.compile({ states: ['team prod'] }))).toMatch(
      /^EVENTS.INVALID_FILTER: state filter "team prod" is neither/,
    );
  });
});
