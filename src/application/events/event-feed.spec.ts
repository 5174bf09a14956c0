import type { LoggedEvent, LogPosition } from '../../domain/shared/event';
import type { EventStore } from '../ports/event-store.port';
import { EventFeed, FeedItem } from './event-feed';
import { EventFilter } from './event-filter';

const EVENTS = 2500;

function log(): LoggedEvent[] {
  return Array.from(
    { length: EVENTS },
    (_, i) =>
      ({
        eventId: `e-${i}`,
        type: 'LockAcquired',
        schemaVersion: 1,
        data: { n: i },
        metadata: { actor: 'alice', correlationId: `c-${i}`, occurredAt: '2026-12-01T00:00:00Z' },
        streamId: `state-s${i % 7}`,
        streamRevision: BigInt(Math.floor(i / 7)),
        position: { transactionId: BigInt(1 + Math.floor(i / 3)), globalPosition: BigInt(i + 1) },
      }) as LoggedEvent,
  );
}

/** Pages of the log that answer at once (no I/O): what a consumer that never waits meets. */
function catchUpOf(events: LoggedEvent[]): Pick<EventStore, 'readLog'> {
  const after = (e: LoggedEvent, p: LogPosition) =>
    e.position.transactionId > p.transactionId ||
    (e.position.transactionId === p.transactionId && e.position.globalPosition > p.globalPosition);
  return {
    readLog: (from, limit) => Promise.resolve(events.filter((e) => after(e, from)).slice(0, limit)),
  };
}

const refusingStore = {
  readLog: () => Promise.reject(new Error('a consumer caught up on the commands’ store')),
} as unknown as EventStore;

describe('EventFeed catching up', () => {
  it('reads through its own reader, delivers every event once in order, and lets other work run between pages', async () => {
    const events = log();
    const feed = new EventFeed(refusingStore, { catchUp: catchUpOf(events), pageSize: 100 });
    let othersRan = 0;
    const other = () => {
      othersRan++;
      if (othersRan < 1000) setImmediate(other);
    };
    setImmediate(other);
    const items: FeedItem[] = [];
    const feedItems = await feed.open(
      { from: 'start', filter: EventFilter.compile(), follow: false },
      new AbortController().signal,
    );
    for await (const item of feedItems) items.push(item);

    expect(othersRan).toBeGreaterThan(1);
    expect(othersRan).toBeLessThan(1000);
    const delivered = items.flatMap((i) => (i.kind === 'event' ? [i.event.eventId] : []));
    expect(delivered).toEqual(events.map((e) => e.eventId));
    expect(items.at(-1)).toEqual({ kind: 'caught-up', position: events.at(-1)!.position });
  });
});

describe('EventFeed catching up beside other callers', () => {
  /** The log's pages, each read noted with its size and whether the others were busy then. */
  function recording(events: LoggedEvent[], busy: () => boolean) {
    const reads: { limit: number; busy: boolean }[] = [];
    const inner = catchUpOf(events);
    return {
      reads,
      store: {
        readLog: (from: LogPosition, limit: number) => {
          reads.push({ limit, busy: busy() });
          return inner.readLog(from, limit);
        },
      } as Pick<EventStore, 'readLog'>,
    };
  }

  async function deliveredBy(feed: EventFeed): Promise<string[]> {
    const items: FeedItem[] = [];
    const feedItems = await feed.open(
      { from: 'start', filter: EventFilter.compile(), follow: false },
      new AbortController().signal,
    );
    for await (const item of feedItems) items.push(item);
    expect(items.at(-1)?.kind).toBe('caught-up');
    return items.flatMap((i) => (i.kind === 'event' ? [i.event.eventId] : []));
  }

  it('reads a small page while others are busy and waits for them before the next', async () => {
    const events = log();
    let busy = true;
    const { reads, store } = recording(events, () => busy);
    setTimeout(() => (busy = false), 50);
    const feed = new EventFeed(refusingStore, {
      catchUp: store,
      pageSize: 1000,
      othersBusy: () => busy,
      giveWayMs: 10_000,
    });

    expect(await deliveredBy(feed)).toEqual(events.map((e) => e.eventId));
    expect(reads[0]).toEqual({ limit: 100, busy: true });
    // Every later page waited until the others were done, and was whole again.
    expect(reads.slice(1)).toEqual(reads.slice(1).map(() => ({ limit: 1000, busy: false })));
  });

  it('still finishes when the others never stop, at a page per wait', async () => {
    const events = log();
    const { reads, store } = recording(events, () => true);
    const feed = new EventFeed(refusingStore, {
      catchUp: store,
      pageSize: 1000,
      othersBusy: () => true,
      giveWayMs: 5,
    });

    expect(await deliveredBy(feed)).toEqual(events.map((e) => e.eventId));
    expect(reads.every((r) => r.limit === 100)).toBe(true);
    expect(reads.length).toBe(Math.ceil(EVENTS / 100) + 1);
  });
});
