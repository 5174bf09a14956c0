import type { LoggedEvent } from '../../domain/shared/event';
import { formatCursor } from '../../domain/shared/log-cursor';
import * as json from '../events/event-json';
import { sseFrame } from './sse-frames';

function event(n: number): LoggedEvent {
  return {
    eventId: `e-${n}`,
    type: 'LockAcquired',
    schemaVersion: 1,
    data: { n, note: 'ünïcode' },
    metadata: { actor: 'alice', correlationId: `c-${n}`, occurredAt: '2026-12-01T00:00:00Z' },
    streamId: 'state-s',
    streamRevision: BigInt(n),
    position: { transactionId: BigInt(n), globalPosition: BigInt(n) },
  } as LoggedEvent;
}

const text = (frame: Buffer | string) => frame.toString();

describe('SSE frames', () => {
  it('frames an event as its position and its JSON, and a batch as its events’ frames one after another', () => {
    const [a, b] = [event(1), event(2)];
    const expected = (e: LoggedEvent) =>
      `id: ${formatCursor(e.position)}\ndata: ${json.eventJson(e)}\n\n`;

    expect(text(sseFrame({ kind: 'event', event: a }))).toBe(expected(a));
    expect(text(sseFrame({ kind: 'events', events: [a, b] }))).toBe(expected(a) + expected(b));
    expect(text(sseFrame({ kind: 'caught-up', position: b.position }))).toBe(
      `id: ${formatCursor(b.position)}\nevent: caught-up\ndata: {"position":"${formatCursor(b.position)}"}\n\n`,
    );
  });

  it('frames an event once for every subscriber handed the same event', () => {
    // Framing reads each event's type once.
    let framed = 0;
    const events = [event(1), event(2), event(3)].map((e) =>
      Object.defineProperty({ ...e }, 'type', {
        get: () => {
          framed++;
          return e.type;
        },
      }),
    );
    const written = Array.from({ length: 8 }, () => text(sseFrame({ kind: 'events', events })));

    expect(new Set(written).size).toBe(1);
    expect(framed).toBe(3);
  });

  it('frames a batch of other events anew, even when it begins with the same one', () => {
    const [a, b, c] = [event(1), event(2), event(3)];
    const ab = text(sseFrame({ kind: 'events', events: [a, b] }));

    expect(text(sseFrame({ kind: 'events', events: [a, c] }))).toBe(
      text(sseFrame({ kind: 'event', event: a })) + text(sseFrame({ kind: 'event', event: c })),
    );
    expect(text(sseFrame({ kind: 'events', events: [a] }))).toBe(
      text(sseFrame({ kind: 'event', event: a })),
    );
    expect(ab).toContain('"eventId":"e-2"');
  });
});
