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

  it.each([1, 500])(
    'gives the rest of kld a turn within a page of 1,000 events too (batches of %i)',
    async (batch) => {
      const events = log().slice(0, 1000);
      const feed = new EventFeed(refusingStore, { catchUp: catchUpOf(events), pageSize: 1000 });
      const feedItems = await feed.open(
        { from: 'start', filter: EventFilter.compile(), follow: false, batch },
        new AbortController().signal,
      );
      // Asked for once the first event is out: a command's statement answered then.
      let delivered = 0;
      let otherRanAfter: number | null = null;
      const ids: string[] = [];
      for await (const item of feedItems) {
        const got =
          item.kind === 'event' ? [item.event] : item.kind === 'events' ? item.events : [];
        if (delivered === 0 && got.length > 0) setImmediate(() => (otherRanAfter = delivered));
        delivered += got.length;
        ids.push(...got.map((e) => e.eventId));
      }

      expect(otherRanAfter).not.toBeNull();
      expect(otherRanAfter!).toBeLessThan(events.length);
      expect(ids).toEqual(events.map((e) => e.eventId));
    },
  );

  it('lets subscribers catching up side by side take one slice of events per turn between them, not one each', async () => {
    const events = log().slice(0, 1000);
    const feed = new EventFeed(refusingStore, { catchUp: catchUpOf(events), pageSize: 1000 });
    // The rest of kld: a piece of work every turn of the loop, counting turns.
    let turn = 0;
    let done = false;
    const other = () => {
      turn++;
      if (!done) setImmediate(other);
    };
    setImmediate(other);
    // Each item is a slice (batches of 100): the turn it was handed out in.
    const turnsOfSlices: number[] = [];
    const readers = Array.from({ length: 4 }, async () => {
      const items = await feed.open(
        { from: 'start', filter: EventFilter.compile(), follow: false, batch: 100 },
        new AbortController().signal,
      );
      const ids: string[] = [];
      for await (const item of items) {
        if (item.kind !== 'events') continue;
        turnsOfSlices.push(turn);
        ids.push(...item.events.map((e) => e.eventId));
      }
      return ids;
    });
    const read = await Promise.all(readers);
    done = true;

    for (const ids of read) expect(ids).toEqual(events.map((e) => e.eventId));
    expect(turnsOfSlices).toHaveLength(40);
    expect(new Set(turnsOfSlices).size).toBe(turnsOfSlices.length);
  });

  it('reads each page of the log once for subscribers catching up from the same place together', async () => {
    const events = log().slice(0, 2000);
    const reads: string[] = [];
    const store = catchUpOf(events);
    const feed = new EventFeed(refusingStore, {
      pageSize: 500,
      catchUp: {
        readLog: (from, limit) => {
          reads.push(String(from.globalPosition));
          return store.readLog(from, limit);
        },
      },
    });
    const read = await Promise.all(
      Array.from({ length: 8 }, async () => {
        const items = await feed.open(
          { from: 'start', filter: EventFilter.compile(), follow: false, batch: 100 },
          new AbortController().signal,
        );
        const ids: string[] = [];
        for await (const item of items)
          if (item.kind === 'events') ids.push(...item.events.map((e) => e.eventId));
        return ids;
      }),
    );

    for (const ids of read) expect(ids).toEqual(events.map((e) => e.eventId));
    // Four full pages, one read of each; the head (an empty page) as each reader got there.
    expect(reads.filter((from) => from !== '2000')).toEqual(['0', '500', '1000', '1500']);
  });

  it('takes the rest of a page before another subscriber’s next page: few pages are held half read', async () => {
    const events = log().slice(0, 2000);
    const feed = new EventFeed(refusingStore, { catchUp: catchUpOf(events), pageSize: 1000 });
    // Which subscriber each slice (batches of 100) went to, in the order they went.
    const order: number[] = [];
    await Promise.all(
      [0, 1, 2].map(async (n) => {
        const items = await feed.open(
          { from: 'start', filter: EventFilter.compile(), follow: false, batch: 100 },
          new AbortController().signal,
        );
        for await (const item of items) if (item.kind === 'events') order.push(n);
      }),
    );

    expect(order).toHaveLength(60);
    // Runs of one subscriber's slices: each a whole page of 10.
    const runs: number[] = [];
    for (const [i, n] of order.entries()) {
      if (i === 0 || order[i - 1] !== n) runs.push(1);
      else runs[runs.length - 1]++;
    }
    expect(runs.every((r) => r % 10 === 0)).toBe(true);
  });
});
