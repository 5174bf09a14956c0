import type { FeedItem } from '../../application/events/event-feed';
import type { LoggedEvent } from '../../domain/shared/event';
import { formatCursor } from '../../domain/shared/log-cursor';
import { keptPerBatch } from '../events/kept-per-batch';
import { encodeBatches, encodeEvent, type OversizedEvent } from './event-message-encoding';

/**
 * The most bytes a message may take when a call does not say
 * (max_message_bytes 0): a gRPC client's default receive limit, and the
 * least a call may ask for. A client given a bigger message fails the call
 * itself (RESOURCE_EXHAUSTED) and could never get past that event: kld says
 * so instead, naming the event.
 */
export const DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024;
/**
 * Most JSON text (data and metadata, in characters) a batch holds: at 3
 * bytes a character at worst, well inside a client's default 4 MiB limit
 * on a received message.
 */
const BATCH_JSON_CHARS = 1 << 20;
/**
 * A call that takes one event a message (max_batch 0 or 1) is still handed
 * the events at hand by the feed in groups of up to this many, as SSE is,
 * and writes each event as its own message: one feed item, and one kept
 * encoding, per group rather than per event.
 */
const EVENTS_PER_GROUP = 100;

/** How a call takes its events. */
export interface CallMessages {
  /** max_batch, 1 for one event a message. */
  maxBatch: number;
  /** max_message_bytes, or its default. */
  maxBytes: number;
}

/** The batch to ask the feed for. */
export function feedBatch({ maxBatch }: CallMessages): number {
  return maxBatch === 1 ? EVENTS_PER_GROUP : maxBatch;
}

/**
 * Messages are encoded once for every call handed the same events (the
 * feed hands subscribers catching up together, and live ones, the same
 * event objects in the same batches), and kept while the batch's first
 * event is held (keptPerBatch). Batch messages are encoded for the smallest
 * limit a call may have: every call takes them, up to an event bigger than
 * that, which a call with a bigger limit has encoded for itself.
 */
const eventMessages = keptPerBatch((events) => events.map(encodeEvent));
const batchMessages = keptPerBatch((events) =>
  encodeBatches(events, BATCH_JSON_CHARS, DEFAULT_MAX_MESSAGE_BYTES),
);

/**
 * The EventMessages of one feed item for a call: a batch splits where its
 * JSON grows too big. An event whose message would be over the call's
 * `maxBytes` is not sent: the messages are those before it, and `oversized`
 * names it. Events and batches come encoded; markers as objects (protobufjs
 * encodes them).
 */
export function feedMessages(
  item: FeedItem,
  call: CallMessages,
): { out: readonly (Buffer | Record<string, unknown>)[]; oversized: OversizedEvent | null } {
  switch (item.kind) {
    case 'event':
      return oneEach([item.event], [encodeEvent(item.event)], call.maxBytes);
    case 'events': {
      if (call.maxBatch === 1) {
        return oneEach(item.events, eventMessages(item.events), call.maxBytes);
      }
      const kept = batchMessages(item.events);
      const { messages: out, oversized } =
        kept.oversized === null || kept.oversized.bytes > call.maxBytes
          ? kept
          : encodeBatches(item.events, BATCH_JSON_CHARS, call.maxBytes);
      return { out, oversized };
    }
    case 'caught-up':
      return { out: [{ caught_up: { position: formatCursor(item.position) } }], oversized: null };
    case 'checkpoint':
      return { out: [{ checkpoint: { position: formatCursor(item.position) } }], oversized: null };
  }
}

function oneEach(
  events: readonly LoggedEvent[],
  messages: readonly Buffer[],
  maxBytes: number,
): { out: readonly Buffer[]; oversized: OversizedEvent | null } {
  const over = messages.findIndex((m) => m.length > maxBytes);
  return over === -1
    ? { out: messages, oversized: null }
    : {
        out: messages.slice(0, over),
        oversized: { event: events[over], bytes: messages[over].length },
      };
}
