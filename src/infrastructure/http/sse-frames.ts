import type { FeedItem } from '../../application/events/event-feed';
import type { LoggedEvent } from '../../domain/shared/event';
import { formatCursor } from '../../domain/shared/log-cursor';
import { eventJson } from '../events/event-json';

/**
 * Frames of events still held by someone, as the bytes written: subscribers
 * catching up from the same place get the same event objects (the feed
 * reads each page once for them all), and live subscribers the same ones
 * from the tail, so each event is framed and encoded once between them.
 */
const frames = new WeakMap<LoggedEvent, Buffer>();

function eventFrame(event: LoggedEvent): Buffer {
  let bytes = frames.get(event);
  if (bytes === undefined) {
    const position = formatCursor(event.position);
    bytes = Buffer.from(`id: ${position}\ndata: ${eventJson(event, position)}\n\n`);
    frames.set(event, bytes);
  }
  return bytes;
}

/** What `GET /v1/events` writes for a feed item. */
export function sseFrame(item: FeedItem): Buffer | string {
  switch (item.kind) {
    case 'event':
      return eventFrame(item.event);
    case 'events':
      return Buffer.concat(item.events.map(eventFrame));
    case 'caught-up':
    case 'checkpoint': {
      const position = formatCursor(item.position);
      return `id: ${position}\nevent: ${item.kind}\ndata: ${JSON.stringify({ position })}\n\n`;
    }
  }
}
