import { createHash } from 'node:crypto';
import type { LoggedEvent } from '../../domain/shared/event';
import { formatCursor } from '../../domain/shared/log-cursor';
import { parseJsonLossless, stringifyJson } from '../../domain/terraform';
import type { EventStore, ReadStreamOptions } from '../ports/event-store.port';
import { StateArchives } from './state-archive';

const EVENTS = 2500;
const clock = { now: () => new Date('2026-12-02T00:00:00Z') };
const ids = { uuid: () => '00000000-0000-4000-8000-000000000000' };

/** A history whose reads answer at once (no I/O): what a socket that never waits meets. */
function history(): LoggedEvent[] {
  return Array.from({ length: EVENTS }, (_, i) => {
    // Every other event carries its data as stored text, one with an exact big number.
    const text = `{"address":"null_resource.n[${i}]","big":12345678901234567890123,"pad":"${'x'.repeat(200)}"}`;
    const data = parseJsonLossless(text);
    return {
      eventId: `e-${i}`,
      type: 'LifecycleOpened',
      schemaVersion: 1,
      data,
      ...(i % 2 === 0 ? { dataJson: JSON.stringify(data) } : {}),
      metadata: { actor: 'alice', correlationId: `c-${i}`, occurredAt: '2026-12-01T00:00:00Z' },
      streamId: 'state-big',
      streamRevision: BigInt(i),
      position: { transactionId: 1n, globalPosition: BigInt(i + 1) },
    } as LoggedEvent;
  });
}

function readsOf(events: LoggedEvent[]): Pick<EventStore, 'readStream'> {
  return {
    readStream: (_stream: string, options: ReadStreamOptions = {}) => {
      const from = Number(options.fromRevision ?? 0n);
      return Promise.resolve(events.slice(from, from + (options.maxCount ?? events.length)));
    },
  };
}

const refusingStore = {
  readStream: () => Promise.reject(new Error('an export read the commands’ store')),
} as unknown as EventStore;

describe('StateArchives.export', () => {
  it('reads through its own reader, and lets other work run while it builds a long history', async () => {
    const events = history();
    const archives = new StateArchives(
      refusingStore,
      { caughtUp: () => Promise.resolve() } as never,
      clock,
      ids,
      ids,
      readsOf(events),
    );
    let othersRan = 0;
    const other = () => {
      othersRan++;
      if (othersRan < 1000) setImmediate(other);
    };
    setImmediate(other);
    const lines: string[] = [];
    for await (const line of archives.export('big')) lines.push(line);

    // Others got turns while the archive was built, not only after it.
    expect(othersRan).toBeGreaterThan(1);
    expect(othersRan).toBeLessThan(1000);
    // Each line as the whole event stringified: exact numbers kept, same text either way.
    const [header, ...body] = lines;
    expect(body).toHaveLength(EVENTS);
    body.forEach((line, i) => {
      const e = events[i]!;
      const expected = stringifyJson({
        revision: i,
        eventId: e.eventId,
        position: formatCursor(e.position),
        type: e.type,
        schemaVersion: e.schemaVersion,
        metadata: e.metadata,
        data: e.data,
      });
      expect(line).toContain('"big":12345678901234567890123,');
      expect(line).toBe(`${expected}\n`);
    });
    const hash = createHash('sha256');
    for (const line of body) hash.update(line);
    expect(JSON.parse(header!)).toMatchObject({
      events: EVENTS,
      checksum: `sha256:${hash.digest('hex')}`,
    });
  });
});
