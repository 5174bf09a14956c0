import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { EventFeed } from '../src/application/events/event-feed';
import { EventFilter } from '../src/application/events/event-filter';
import { PostgresEventStore } from '../src/infrastructure/event-store/postgres-event-store';
import { Database } from '../src/infrastructure/postgres/database';
import { Notifier } from '../src/infrastructure/postgres/notifier';
import { openBenchDatabase } from './support/bench-database';

/**
 * What a live event subscriber that stops reading keeps kld holding: one
 * subscriber joins the live tail and never reads again while writers append
 * KL_BENCH_EVENTS events of KL_BENCH_EVENT_KIB KiB each. Measured with the
 * buffer bounded by count only (10,000 events, as before) and by count and
 * bytes (64 MiB, now): events and bytes the subscriber's buffer held at most,
 * and the heap still in use once the appends are done (after a GC).
 *
 *   npm run build && node --expose-gc dist/bench/event-feed-memory.js
 *   KL_BENCH_EVENTS=200 KL_BENCH_EVENT_KIB=1024
 */

const EVENTS = Number(process.env.KL_BENCH_EVENTS ?? 200);
const EVENT_KIB = Number(process.env.KL_BENCH_EVENT_KIB ?? 1024);
const MiB = 1024 * 1024;

function heapUsed(): number {
  (globalThis as { gc?: () => void }).gc?.();
  return process.memoryUsage().heapUsed;
}

async function main(): Promise<void> {
  if (!(globalThis as { gc?: unknown }).gc) throw new Error('run with node --expose-gc');
  const logger = pino({ level: 'warn' }, pino.destination(2));
  const bench = await openBenchDatabase(logger);
  const db = new Database(bench.url);
  const notifier = new Notifier(bench.url);
  const store = new PostgresEventStore(db, notifier);
  const blob = 'x'.repeat(EVENT_KIB * 1024);
  console.log(`${EVENTS} events of ${EVENT_KIB} KiB, one live subscriber that stops reading`);
  try {
    for (const [label, liveBufferBytes] of [
      ['bounded by count only (before)', Infinity],
      ['bounded by count and bytes (now)', undefined],
    ] as const) {
      const feed = new EventFeed(store, { liveBufferBytes });
      const abort = new AbortController();
      const it = (
        await feed.open({ from: 'end', filter: EventFilter.compile(), follow: true }, abort.signal)
      )[Symbol.asyncIterator]();
      await it.next(); // caught up: live from here
      const stalled = it.next(); // the one event it takes, then it reads no more
      const before = heapUsed();
      const stream = `state-bench-${randomUUID()}`;
      let expected: bigint | 'no_stream' = 'no_stream';
      for (let i = 0; i < EVENTS; i++) {
        const r = await store.appendToStream(
          stream,
          [
            {
              eventId: randomUUID(),
              type: 'LockAcquired',
              schemaVersion: 1,
              data: { n: i, blob },
              metadata: {
                actor: 'bench',
                correlationId: randomUUID(),
                causationId: null,
                occurredAt: new Date().toISOString(),
              },
            },
          ],
          { expectedRevision: expected },
        );
        expected = r.nextExpectedRevision;
      }
      // Let the tail hand every event over (or send the subscriber back to the log).
      for (let i = 0; i < 60 && feed.stats().live > 0; i++) {
        await new Promise((r) => setTimeout(r, 50));
      }
      const held = heapUsed() - before;
      await stalled;
      const s = feed.stats();
      console.log(
        `${label}: subscriber ${s.live === 0 ? 'sent back to the log' : 'still live'}; ` +
          `heap held after the appends: ${(held / MiB).toFixed(0)} MiB`,
      );
      abort.abort();
      await it.return?.();
      await feed.close();
    }
  } finally {
    await notifier.close();
    await db.close();
    await bench.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
