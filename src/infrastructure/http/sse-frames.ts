import type { FeedItem } from '../../application/events/event-feed';
import type { LoggedEvent } from '../../domain/shared/event';
import { formatCursor } from '../../domain/shared/log-cursor';
import { eventJson } from '../events/event-json';

function eventFrame(event: LoggedEvent): string {
  const position = formatCursor(event.position);
  return `id: ${position}\ndata: ${eventJson(event, position)}\n\n`;
}

/**
 * The bytes written for a batch of events, kept while its first event is
 * held by someone: subscribers catching up from the same place get the same
 * event objects (the feed reads each page once for them all) in the same
 * batches, so each batch is framed and encoded once between them. One
 * buffer per batch: one per event cost more than the framing it saved for a
 * lone subscriber.
 */
const batches = new WeakMap<LoggedEvent, { events: readonly LoggedEvent[]; bytes: Buffer }>();

function batchFrame(events: readonly LoggedEvent[]): Buffer {
  const [first] = events;
  const known = first === undefined ? undefined : batches.get(first);
  if (
    known !== undefined &&
    known.events.length === events.length &&
    known.events.every((e, i) => e === events[i])
  ) {
    return known.bytes;
  }
  const bytes = Buffer.from(events.map(eventFrame).join(''));
  if (first !== undefined) batches.set(first, { events, bytes });
  return bytes;
}

/** What `GET /v1/events` writes for a feed item. */
export function sseFrame(item: FeedItem): Buffer | string {
  switch (item.kind) {
    case 'event':
      return eventFrame(item.event);
    case 'events':
      return batchFrame(item.events);
    case 'caught-up':
    case 'checkpoint': {
      const position = formatCursor(item.position);
      return `id: ${position}\nevent: ${item.kind}\ndata: ${JSON.stringify({ position })}\n\n`;
    }
  }
}
