import type { LoggedEvent } from '../../domain/shared/event';
import { formatCursor } from '../../domain/shared/log-cursor';
import { encodeBatches, encodeEvent } from './event-message-encoding';
import { DEFAULT_MAX_MESSAGE_BYTES, feedMessages } from './feed-messages';

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

const bytes = (out: readonly unknown[]) => out.map((m) => (m as Buffer).toString('hex'));
const MiB = 1024 * 1024;

describe('feedMessages', () => {
  it('sends an event, and a batch, as their encoded messages', () => {
    const [a, b] = [event(1), event(2)];

    expect(feedMessages({ kind: 'event', event: a }, DEFAULT_MAX_MESSAGE_BYTES)).toEqual({
      out: [encodeEvent(a)],
      oversized: null,
    });
    expect(feedMessages({ kind: 'events', events: [a, b] }, DEFAULT_MAX_MESSAGE_BYTES)).toEqual({
      out: encodeBatches([a, b], 1 << 20).messages,
      oversized: null,
    });
  });

  it('encodes a page handed to eight subscribers once, batched or one event a message', () => {
    const page = counted(Array.from({ length: 5 }, (_, i) => event(i + 1)));
    const batched = Array.from({ length: 8 }, () =>
      bytes(
        feedMessages({ kind: 'events', events: [...page.events] }, DEFAULT_MAX_MESSAGE_BYTES).out,
      ),
    );
    const single = Array.from({ length: 8 }, () =>
      page.events.flatMap((e) =>
        bytes(feedMessages({ kind: 'event', event: e }, DEFAULT_MAX_MESSAGE_BYTES).out),
      ),
    );

    expect(new Set(batched.map((m) => m.join())).size).toBe(1);
    expect(new Set(single.map((m) => m.join())).size).toBe(1);
    // Once for the batch, once for the events one by one: not 8 times each.
    expect(page.encoded()).toBe(10);
  });

  it('stops each call at an event over its own limit, whichever call came first', () => {
    const big = event(2, { pad: 'x'.repeat(6 * MiB) });
    const events = [event(1), big, event(3)];
    const before = encodeBatches([events[0]], 1 << 20).messages;

    const wide = feedMessages({ kind: 'events', events }, 16 * MiB);
    const narrow = feedMessages({ kind: 'events', events }, DEFAULT_MAX_MESSAGE_BYTES);
    const wideAgain = feedMessages({ kind: 'events', events }, 16 * MiB);
    const middle = feedMessages({ kind: 'events', events }, 5 * MiB);

    expect(bytes(wide.out)).toEqual(bytes(encodeBatches(events, 1 << 20).messages));
    expect(wide.oversized).toBeNull();
    expect(bytes(wideAgain.out)).toEqual(bytes(wide.out));
    for (const call of [narrow, middle]) {
      expect(bytes(call.out)).toEqual(bytes(before));
      expect(call.oversized?.event).toBe(big);
      expect(call.oversized?.bytes).toBeGreaterThan(6 * MiB);
    }

    const alone = feedMessages({ kind: 'event', event: big }, DEFAULT_MAX_MESSAGE_BYTES);
    expect(alone).toEqual({ out: [], oversized: { event: big, bytes: encodeEvent(big).length } });
    expect(bytes(feedMessages({ kind: 'event', event: big }, 16 * MiB).out)).toEqual(
      bytes([encodeEvent(big)]),
    );
  });

  it('sends markers as their messages', () => {
    const { position } = event(7);

    expect(feedMessages({ kind: 'caught-up', position }, DEFAULT_MAX_MESSAGE_BYTES).out).toEqual([
      { caught_up: { position: formatCursor(position) } },
    ]);
    expect(feedMessages({ kind: 'checkpoint', position }, DEFAULT_MAX_MESSAGE_BYTES).out).toEqual([
      { checkpoint: { position: formatCursor(position) } },
    ]);
  });
});
