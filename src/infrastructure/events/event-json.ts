import type { RecordedEvent } from '../../domain/shared/event';
import { formatCursor } from '../../domain/shared/log-cursor';
import { stringifyJson } from '../../domain/terraform/lossless-json';

/**
 * An event as consumers get it, over SSE and in `kl events --format json`:
 * one JSON object whose `data` holds numbers exactly as they were written
 * (a state's big numbers travel marked inside the store: lossless-json).
 */
export function eventJson(event: RecordedEvent): string {
  const { metadata } = event;
  const head = JSON.stringify({
    position: formatCursor(event.position),
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
  return `${head.slice(0, -1)},"data":${stringifyJson(event.data)}}`;
}

/** The gRPC `Event` message (proto/kilolock/v1/events.proto). */
export function eventMessage(event: RecordedEvent): Record<string, string | number> {
  const { metadata } = event;
  return {
    position: formatCursor(event.position),
    stream_id: event.streamId,
    stream_revision: event.streamRevision.toString(),
    type: event.type,
    event_id: event.eventId,
    occurred_at: metadata.occurredAt,
    actor: metadata.actor,
    correlation_id: metadata.correlationId,
    causation_id: metadata.causationId ?? '',
    schema_version: event.schemaVersion,
    data_json: stringifyJson(event.data),
    metadata_json: stringifyJson(metadata),
  };
}
