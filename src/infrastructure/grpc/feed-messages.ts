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
 * Messages are encoded once for every subscriber handed the same events
 * (the feed hands subscribers catching up together, and live ones, the same
 * event objects): an event's message kept while the event is held, a
 * batch's (keptPerBatch) while its first event is. A batch's are encoded
 * for the smallest limit a call may have: every call takes them, up to an
 * event bigger than that, which a call with a bigger limit has encoded for
 * itself.
 */
const eventMessages = new WeakMap<LoggedEvent, Buffer>();
const batchMessages = keptPerBatch((events) =>
  encodeBatches(events, BATCH_JSON_CHARS, DEFAULT_MAX_MESSAGE_BYTES),
);

/**
 * The EventMessages of one feed item for a call that takes messages of up
 * to `maxBytes`: a batch splits where its JSON grows too big. An event whose
 * message would be over `maxBytes` is not sent: the messages are those
 * before it, and `oversized` names it. Events and batches come encoded;
 * markers as objects (protobufjs encodes them).
 */
export function feedMessages(
  item: FeedItem,
  maxBytes: number,
): { out: readonly (Buffer | Record<string, unknown>)[]; oversized: OversizedEvent | null } {
  switch (item.kind) {
    case 'event': {
      let message = eventMessages.get(item.event);
      if (message === undefined) {
        message = encodeEvent(item.event);
        eventMessages.set(item.event, message);
      }
      return message.length > maxBytes
        ? { out: [], oversized: { event: item.event, bytes: message.length } }
        : { out: [message], oversized: null };
    }
    case 'events': {
      const kept = batchMessages(item.events);
      const { messages: out, oversized } =
        kept.oversized === null || kept.oversized.bytes > maxBytes
          ? kept
          : encodeBatches(item.events, BATCH_JSON_CHARS, maxBytes);
      return { out, oversized };
    }
    case 'caught-up':
      return { out: [{ caught_up: { position: formatCursor(item.position) } }], oversized: null };
    case 'checkpoint':
      return { out: [{ checkpoint: { position: formatCursor(item.position) } }], oversized: null };
  }
}
