import type { LoggedEvent } from '../../domain/shared/event';
import { formatCursor } from '../../domain/shared/log-cursor';
import { stringifyJson, unmarkNumbers } from '../../domain/terraform/lossless-json';

/**
 * An event as consumers get it, over SSE and in `kl events --format json`:
 * one JSON object whose `data` holds numbers exactly as they were written
 * (a state's big numbers travel marked inside the store: lossless-json).
 */
export function eventJson(event: LoggedEvent, position = formatCursor(event.position)): string {
  const { metadata } = event;
  const head = JSON.stringify({
    position,
    stream: event.streamId,
    revision: Number(event.streamRevision),
    type: event.type,
    eventId: event.eventId,
    schemaVersion: event.schemaVersion,
    occurredAt: metadata.occurredAt,
    actor: metadata.actor,
    correlationId: metadata.correlationId,
    causationId: metadata.causationId ?? null,
    metadata,
  });
  return `${head.slice(0, -1)},"data":${dataJson(event)}}`;
}

/**
 * The event's data as JSON text. The store writes data with JSON.stringify
 * into a json column, which keeps the text as written, so the stored text
 * (`dataJson`, when the event carries it) is exactly what parsing it and
 * stringifying again would give: it goes out as it is, without that round
 * trip.
 */
export function dataJson(event: LoggedEvent): string {
  return event.dataJson !== undefined ? unmarkNumbers(event.dataJson) : stringifyJson(event.data);
}
