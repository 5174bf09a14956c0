import type { FeedItem } from '../../application/events/event-feed';
import type { LoggedEvent } from '../../domain/shared/event';
import { formatCursor } from '../../domain/shared/log-cursor';
import { eventJson } from '../events/event-json';
import { keptPerBatch } from '../events/kept-per-batch';

function eventFrame(event: LoggedEvent): string {
  const position = formatCursor(event.position);
  return `id: ${position}\ndata: ${eventJson(event, position)}\n\n`;
}

/**
 * A batch's frames, as one buffer, framed once for every subscriber handed
 * it (keptPerBatch). One buffer per batch: one per event cost more than the
 * framing it saved for a lone subscriber.
 */
const batchFrame = keptPerBatch((events) => Buffer.from(events.map(eventFrame).join('')));

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
