import type { LoggedEvent } from '../../domain/shared/event';
import { formatCursor } from '../../domain/shared/log-cursor';
import { encodeBatches, encodeEvent } from './event-message-encoding';
import { DEFAULT_MAX_MESSAGE_BYTES, feedBatch, feedMessages } from './feed-messages';

function event(n: number, data: unknown = { n, note: 'ünïcode' }): LoggedEvent {
  return {
    eventId: `e-${n}`,
    type: 'LockAcquired',
    schemaVersion: 1,
    data,
    metadata: { actor: 'alice', correlationId: `c-${n}`, occurredAt: '2026-12-01T00:00:00Z' },
    streamId: 'state-s',
    streamRevision: BigInt(n),
    position: { transactionId: BigInt(n), globalPosition: BigInt(n) },
  } as LoggedEvent;
}

/** Copies of `events` that count how often they are encoded (encoding reads each event's type once). */
function counted(events: LoggedEvent[]): { events: LoggedEvent[]; encoded: () => number } {
  let encoded = 0;
  return {
    events: events.map((e) =>
      Object.defineProperty({ ...e }, 'type', {
        get: () => {
          encoded++;
          return e.type;
        },
      }),
    ),
    encoded: () => encoded,
  };
}

const hex = (out: readonly unknown[]) => out.map((m) => (m as Buffer).toString('hex'));
const MiB = 1024 * 1024;
const single = { maxBatch: 1, maxBytes: DEFAULT_MAX_MESSAGE_BYTES };
const batched = { maxBatch: 1000, maxBytes: DEFAULT_MAX_MESSAGE_BYTES };

describe('feedMessages', () => {
  it('sends each event as its own message, or a batch as batch messages, as the call asked', () => {
    const [a, b] = [event(1), event(2)];

    expect(feedMessages({ kind: 'events', events: [a, b] }, single)).toEqual({
      out: [encodeEvent(a), encodeEvent(b)],
      oversized: null,
    });
    expect(feedMessages({ kind: 'event', event: a }, single)).toEqual({
      out: [encodeEvent(a)],
      oversized: null,
    });
    expect(feedMessages({ kind: 'events', events: [a, b] }, batched)).toEqual({
      out: encodeBatches([a, b], 1 << 20).messages,
      oversized: null,
    });
  });

  it('has the feed hand a call of one event a message the events at hand together', () => {
    expect(feedBatch(single)).toBeGreaterThan(1);
    expect(feedBatch(batched)).toBe(1000);
    expect(feedBatch({ maxBatch: 7, maxBytes: DEFAULT_MAX_MESSAGE_BYTES })).toBe(7);
  });

  it('encodes a page handed to eight subscribers once, batched or one event a message', () => {
    const page = counted(Array.from({ length: 5 }, (_, i) => event(i + 1)));
    const sent = (call: typeof single) =>
      Array.from({ length: 8 }, () =>
        hex(feedMessages({ kind: 'events', events: [...page.events] }, call).out).join(),
      );

    expect(new Set(sent(batched)).size).toBe(1);
    expect(new Set(sent(single)).size).toBe(1);
    // Once for the batch, once for the events one by one: not 8 times each.
    expect(page.encoded()).toBe(10);
  });

  it('stops each call at an event over its own limit, whichever call came first', () => {
    const big = event(2, { pad: 'x'.repeat(6 * MiB) });
    const events = [event(1), big, event(3)];

    for (const maxBatch of [1000, 1]) {
      const messages = (maxBytes: number) =>
        feedMessages({ kind: 'events', events }, { maxBatch, maxBytes });
      const all =
        maxBatch === 1 ? events.map(encodeEvent) : encodeBatches(events, 1 << 20).messages;
      // The smallest message that holds it: alone, or alone in a batch.
      const bigBytes = (
        maxBatch === 1 ? [encodeEvent(big)] : encodeBatches([big], 1 << 20).messages
      )[0].length;
      const before =
        maxBatch === 1 ? [encodeEvent(events[0])] : encodeBatches([events[0]], 1 << 20).messages;

      const wide = messages(16 * MiB);
      const narrow = messages(DEFAULT_MAX_MESSAGE_BYTES);
      const wideAgain = messages(16 * MiB);
      const middle = messages(5 * MiB);

      for (const call of [wide, wideAgain]) {
        expect(hex(call.out)).toEqual(hex(all));
        expect(call.oversized).toBeNull();
      }
      for (const call of [narrow, middle]) {
        expect(hex(call.out)).toEqual(hex(before));
        expect(call.oversized?.event === big).toBe(true);
        expect(call.oversized?.bytes).toBe(bigBytes);
      }
    }
  });

  it('sends markers as their messages', () => {
    const { position } = event(7);

    expect(feedMessages({ kind: 'caught-up', position }, batched).out).toEqual([
      { caught_up: { position: formatCursor(position) } },
    ]);
    expect(feedMessages({ kind: 'checkpoint', position }, single).out).toEqual([
      { checkpoint: { position: formatCursor(position) } },
    ]);
  });
});
