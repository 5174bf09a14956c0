import { randomBytes, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type {
  EventStore,
  EventToAppend,
  ExpectedRevision,
} from '../../src/application/ports/event-store.port';
import { benchEvent } from './events';
import { distribution, Distribution } from './stats';

export interface ThroughputOptions {
  writers: number;
  eventsPerAppend: number;
  seconds: number;
}

export interface ThroughputResult extends ThroughputOptions {
  events: number;
  appends: number;
  elapsedSeconds: number;
  eventsPerSecond: number;
  /** Latency of one appendToStream call, as its caller sees it. */
  appendLatency: Distribution;
}

/**
 * Closed-loop writers: each appends to a stream of its own, with the exact
 * expected revision a real command handler would pass, as fast as the store
 * lets it, until the time is up. Writers never contend for a stream, so the
 * figure is the store's, not optimistic-concurrency retries'.
 */
export async function measureThroughput(
  store: EventStore,
  options: ThroughputOptions,
): Promise<ThroughputResult> {
  const { writers, eventsPerAppend, seconds } = options;
  // Built once and reused: building events is the caller's cost, serialising
  // them (JSON.stringify inside the store) stays in the measurement.
  const batches: EventToAppend[][] = Array.from({ length: writers }, () =>
    Array.from({ length: eventsPerAppend }, (_, i) => benchEvent(i)),
  );
  const latencies: number[] = [];
  let events = 0;
  const runId = randomBytes(4).toString('hex');
  const start = performance.now();
  const deadline = start + seconds * 1000;

  const writer = async (w: number) => {
    const streamId = `state-bench-${runId}-w${w}`;
    let expectedRevision: ExpectedRevision = 'no_stream';
    while (performance.now() < deadline) {
      // Every event is new (a repeated id would be an idempotent repeat).
      const batch = batches[w].map((e) => ({ ...e, eventId: randomUUID() }));
      const t0 = performance.now();
      const result = await store.appendToStream(streamId, batch, { expectedRevision });
      latencies.push(performance.now() - t0);
      expectedRevision = result.nextExpectedRevision;
      events += eventsPerAppend;
    }
  };
  await Promise.all(Array.from({ length: writers }, (_, w) => writer(w)));
  // Until the last append finished, not the deadline: an append started just
  // before the deadline is counted, so its time must be too.
  const elapsedSeconds = (performance.now() - start) / 1000;
  return {
    ...options,
    events,
    appends: latencies.length,
    elapsedSeconds,
    eventsPerSecond: events / elapsedSeconds,
    appendLatency: distribution(latencies),
  };
}
