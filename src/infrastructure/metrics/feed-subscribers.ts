import type { EventFeed, FeedItem, FeedRequest } from '../../application/events/event-feed';
import { comparePositions, LOG_START, LogPosition } from '../../domain/shared/event';
import type { Database } from '../postgres/database';

/** The transports that read the event feed. */
export type FeedTransport = 'grpc' | 'sse';

/** What `/metrics` reports of the subscribers of one transport. */
export interface SubscriberLag {
  transport: FeedTransport;
  /** Open subscriptions on this replica. */
  subscribers: number;
  /** Events in the log after the position of the furthest-behind subscriber. */
  events: number;
  /** Age of the oldest of them; 0 when every subscriber has every event. */
  seconds: number;
}

interface Subscription {
  transport: FeedTransport;
  /** The last position it was given (an event, caught-up or checkpoint); null: not known yet. */
  position: LogPosition | null;
}

/**
 * The open subscriptions of this replica's event feed, each with the last
 * position it was given, for the subscriber metrics. It sees the feed from
 * outside (what each transport iterates), so the feed itself stays as it is.
 */
export class FeedSubscribers {
  private readonly open = new Set<Subscription>();

  /**
   * `feed` as `transport` reads it: the same feed (its live tail, its
   * checks), whose subscriptions are counted while they are iterated. The
   * result delegates everything but `open` to `feed`.
   */
  meter(feed: EventFeed, transport: FeedTransport): EventFeed {
    const open = async (request: FeedRequest, signal: AbortSignal) => {
      // A refused position throws here: it never counts as a subscriber.
      const items = await feed.open(request, signal);
      const start =
        request.from === 'end' ? null : request.from === 'start' ? LOG_START : request.from;
      return this.counted(items, { transport, position: start });
    };
    return Object.create(feed, { open: { value: open } }) as EventFeed;
  }

  private counted(items: AsyncIterable<FeedItem>, sub: Subscription): AsyncIterable<FeedItem> {
    const subscriptions = this.open;
    return {
      async *[Symbol.asyncIterator]() {
        subscriptions.add(sub);
        try {
          for await (const item of items) {
            sub.position =
              item.kind === 'event'
                ? item.event.position
                : item.kind === 'events'
                  ? item.events[item.events.length - 1].position
                  : item.position;
            yield item;
          }
        } finally {
          subscriptions.delete(sub);
        }
      },
    };
  }

  /** Open subscriptions and the furthest-behind known position, per transport. */
  snapshot(): { transport: FeedTransport; subscribers: number; slowest: LogPosition | null }[] {
    return (['grpc', 'sse'] as const).map((transport) => {
      let subscribers = 0;
      let slowest: LogPosition | null = null;
      for (const sub of this.open) {
        if (sub.transport !== transport) continue;
        subscribers++;
        if (sub.position && (!slowest || comparePositions(sub.position, slowest) < 0)) {
          slowest = sub.position;
        }
      }
      return { transport, subscribers, slowest };
    });
  }
}

/**
 * Each transport's subscriber count, and the committed events after its
 * furthest-behind subscriber's position with the age of the oldest: the
 * same measure as a projector's lag (projection-lag.ts), read at each scrape.
 */
export async function subscriberLag(
  db: Database,
  subscribers: FeedSubscribers,
): Promise<SubscriberLag[]> {
  const out: SubscriberLag[] = [];
  for (const { transport, subscribers: count, slowest } of subscribers.snapshot()) {
    if (!slowest) {
      out.push({ transport, subscribers: count, events: 0, seconds: 0 });
      continue;
    }
    const [row] = await db.query<{ events: string; seconds: number | null }>(
      `SELECT count(*) AS events,
              extract(epoch FROM now() - min(created_at))::float8 AS seconds
         FROM kl_events
        WHERE (transaction_id, global_position) > ($1::text::xid8, $2::bigint)`,
      [slowest.transactionId.toString(), slowest.globalPosition.toString()],
    );
    out.push({
      transport,
      subscribers: count,
      events: Number(row.events),
      seconds: Math.max(0, row.seconds ?? 0),
    });
  }
  return out;
}
