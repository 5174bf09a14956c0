import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { bulkDatabase } from '../src/app/event-store.module';
import { EventFeed } from '../src/application/events/event-feed';
import { EventFilter } from '../src/application/events/event-filter';
import { eventJson } from '../src/infrastructure/events/event-json';
import { PostgresEventStore } from '../src/infrastructure/event-store/postgres-event-store';
import { Database } from '../src/infrastructure/postgres/database';
import { Notifier } from '../src/infrastructure/postgres/notifier';
import { openBenchDatabase } from './support/bench-database';

/**
 * Many subscribers catching up at once, as after a kld restart: a log of
 * KL_BENCH_EVENTS events of KL_BENCH_EVENT_KIB KiB (one commit), then
 * KL_BENCH_READERS in-process EventFeed readers started together from the
 * log's start, reading through kld's bulk pool (2 connections, turns taken
 * before the pool; KL_BENCH_NO_TURNS=1: the bare pool, as before) with its
 * default connect timeout. Prints how many ended in an error and how
 * long the slowest took to read everything. Each reader encodes every event
 * as SSE does (no socket).
 *
 *   npm run build && node dist/bench/bulk-catch-up.js
 *   KL_BENCH_EVENTS=20000 KL_BENCH_EVENT_KIB=3 KL_BENCH_READERS=256
 */

const EVENTS = Number(process.env.KL_BENCH_EVENTS ?? 20_000);
const EVENT_KIB = Number(process.env.KL_BENCH_EVENT_KIB ?? 3);
const READERS = Number(process.env.KL_BENCH_READERS ?? 256);

async function main(): Promise<void> {
  const logger = pino({ level: 'warn' }, pino.destination(2));
  const bench = await openBenchDatabase(logger);
  const db = new Database(bench.url);
  const bulk = process.env.KL_BENCH_NO_TURNS
    ? new Database(bench.url, { max: 2 })
    : bulkDatabase(bench.url);
  const notifier = new Notifier(bench.url);
  const store = new PostgresEventStore(db, notifier);
  const bulkStore = new PostgresEventStore(bulk, notifier, undefined, 0);
  try {
    const blob = 'x'.repeat(EVENT_KIB * 1024);
    const stream = `state-bench-${randomUUID()}`;
    // One commit, as a 20k-instance state's first version.
    await store.appendToStream(
      stream,
      Array.from({ length: EVENTS }, (_, i) => ({
        eventId: randomUUID(),
        type: 'BenchEvent',
        schemaVersion: 1,
        data: { i, blob },
        metadata: {
          actor: 'bench',
          correlationId: randomUUID(),
          causationId: null,
          occurredAt: new Date().toISOString(),
        },
      })),
      { expectedRevision: 'no_stream' },
    );
    console.log(
      `${EVENTS} events of ${EVENT_KIB} KiB, ${READERS} readers from the start, bulk pool of 2 (${bench.origin})`,
    );
    // The longest a page read took, waiting for a connection included: what the pool's connect timeout bounds.
    let longestPageMs = 0;
    const catchUp = {
      readLog: async (from: Parameters<PostgresEventStore['readLog']>[0], limit: number) => {
        const t0 = Date.now();
        try {
          return await bulkStore.readLog(from, limit);
        } finally {
          longestPageMs = Math.max(longestPageMs, Date.now() - t0);
        }
      },
    };
    const feed = new EventFeed(store, { catchUp });
    const started = Date.now();
    const results = await Promise.all(
      Array.from({ length: READERS }, async () => {
        let n = 0;
        try {
          const items = await feed.open(
            { from: 'start', filter: EventFilter.compile(), follow: false },
            new AbortController().signal,
          );
          // Each event encoded as SSE sends it: kld's event loop does that work too.
          for await (const item of items) if (item.kind === 'event' && eventJson(item.event)) n++;
          return { ok: n === EVENTS, n, ms: Date.now() - started, error: null as string | null };
        } catch (err) {
          return { ok: false, n, ms: Date.now() - started, error: (err as Error).message };
        }
      }),
    );
    const failed = results.filter((r) => r.error !== null);
    const short = results.filter((r) => r.error === null && !r.ok);
    const ms = results.map((r) => r.ms).sort((a, b) => a - b);
    console.log(
      `errors ${failed.length}/${READERS}` +
        (failed.length
          ? ` (first after ${Math.min(...failed.map((f) => f.ms))} ms: ${failed[0].error})`
          : '') +
        `, short reads ${short.length}, longest page read ${longestPageMs} ms, first done ${ms[0]} ms, median ${ms[Math.floor(ms.length / 2)]} ms, last ${ms[ms.length - 1]} ms`,
    );
    await feed.close();
  } finally {
    await notifier.close();
    await bulk.close();
    await db.close();
    await bench.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
