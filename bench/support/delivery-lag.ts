import { randomBytes } from 'node:crypto';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import type { EventStore, ExpectedRevision } from '../../src/application/ports/event-store.port';
import type { LogPosition } from '../../src/domain/shared/event';
import { benchEvent } from './events';
import { distribution, Distribution } from './stats';

export interface DeliveryLagOptions {
  writers: number;
  /** Total appends per second across all writers. */
  ratePerSecond: number;
  seconds: number;
  /** Subscribe from here: the head of the log, so the subscriber starts live. */
  from: LogPosition;
}

export interface DeliveryLagResult extends DeliveryLagOptions {
  appended: number;
  delivered: number;
  /** Appended but not delivered within the grace period after the writers stopped. */
  missing: number;
  achievedRatePerSecond: number;
  /** From append() resolving to the subscriber receiving the event. */
  fromResolved: Distribution;
  /** From just before append() is called to the subscriber receiving the event. */
  fromCalled: Distribution;
  /** Events the subscriber had before the writer's append() promise resolved. */
  deliveredBeforeResolve: number;
  appendLatency: Distribution;
  /** Node event-loop delay during the run: bench-side noise in every figure above. */
  eventLoopDelay: Distribution;
}

interface Timing {
  calledAt: number;
  resolvedAt?: number;
  receivedAt?: number;
}

const DRAIN_GRACE_MS = 5_000;
const MARKER_TIMEOUT_MS = 10_000;

/** Rejects when the subscription stops: it must run until we abort it. */
function ended(subscriber: Promise<void>): Promise<never> {
  return subscriber.then(() => {
    throw new Error('subscription ended before it was aborted');
  });
}

function timeout(ms: number, what: string): Promise<never> {
  return new Promise((_, reject) => {
    setTimeout(() => reject(new Error(`${what} not delivered within ${ms} ms`)), ms).unref();
  });
}

/**
 * One `store.subscribe` consumer running while paced writers append single
 * events. Each event's correlation id identifies it, so its three instants
 * (append called, append resolved, received) are matched exactly. Writers
 * are paced on an absolute schedule, so a slow append does not lower the
 * offered rate; they are staggered so appends do not arrive in bursts.
 */
export async function measureDeliveryLag(
  store: EventStore,
  options: DeliveryLagOptions,
): Promise<DeliveryLagResult> {
  const { writers, ratePerSecond, seconds, from } = options;
  const runId = randomBytes(4).toString('hex');
  const timings = new Map<string, Timing>();
  const waiters = new Map<string, () => void>();
  const abort = new AbortController();

  const subscriber = (async () => {
    for await (const event of store.subscribe(from, abort.signal)) {
      // Stamp first: anything done before this line would count as lag.
      const receivedAt = performance.now();
      const id = event.metadata.correlationId;
      const timing = timings.get(id);
      if (timing) timing.receivedAt = receivedAt;
      waiters.get(id)?.();
    }
  })();
  let subscriberError: unknown;
  subscriber.catch((err: unknown) => (subscriberError = err));

  try {
    // Wait until the subscriber is live (has delivered an event appended
    // after it started) so start-up does not show up as lag.
    const markerId = `marker-${runId}`;
    const markerSeen = new Promise<void>((resolve) => waiters.set(markerId, resolve));
    await store.appendToStream(`bench-marker-${runId}`, [benchEvent(0, markerId)], {
      expectedRevision: 'no_stream',
    });
    await Promise.race([markerSeen, ended(subscriber), timeout(MARKER_TIMEOUT_MS, 'marker')]);

    const loopDelay = monitorEventLoopDelay({ resolution: 1 });
    loopDelay.enable();
    const latencies: number[] = [];
    const intervalMs = (writers * 1000) / ratePerSecond;
    const start = performance.now();
    const deadline = start + seconds * 1000;

    const writer = async (w: number) => {
      const streamId = `state-lag-${runId}-w${w}`;
      let expectedRevision: ExpectedRevision = 'no_stream';
      for (let k = 0; ; k++) {
        const due = start + (w / writers) * intervalMs + k * intervalMs;
        if (due >= deadline) return;
        const wait = due - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        const id = `${runId}-${w}-${k}`;
        const event = benchEvent(k, id);
        const timing: Timing = { calledAt: performance.now() };
        timings.set(id, timing);
        const result = await store.appendToStream(streamId, [event], { expectedRevision });
        timing.resolvedAt = performance.now();
        latencies.push(timing.resolvedAt - timing.calledAt);
        expectedRevision = result.nextExpectedRevision;
      }
    };
    await Promise.all(Array.from({ length: writers }, (_, w) => writer(w)));
    const writersDone = performance.now();
    loopDelay.disable();

    // Let the subscriber catch up with the tail before judging what is missing.
    const drainDeadline = writersDone + DRAIN_GRACE_MS;
    const undelivered = () => [...timings.values()].some((t) => t.receivedAt === undefined);
    while (undelivered() && performance.now() < drainDeadline) {
      await new Promise((r) => setTimeout(r, 10));
    }
    // Events lost to a crashed subscriber are not lag: fail instead.
    if (subscriberError !== undefined) throw subscriberError;

    const fromResolved: number[] = [];
    const fromCalled: number[] = [];
    let deliveredBeforeResolve = 0;
    for (const t of timings.values()) {
      if (t.receivedAt === undefined || t.resolvedAt === undefined) continue;
      fromResolved.push(t.receivedAt - t.resolvedAt);
      fromCalled.push(t.receivedAt - t.calledAt);
      if (t.receivedAt < t.resolvedAt) deliveredBeforeResolve++;
    }
    return {
      ...options,
      appended: timings.size,
      delivered: fromResolved.length,
      missing: timings.size - fromResolved.length,
      achievedRatePerSecond: timings.size / ((writersDone - start) / 1000),
      fromResolved: distribution(fromResolved),
      fromCalled: distribution(fromCalled),
      deliveredBeforeResolve,
      appendLatency: distribution(latencies),
      eventLoopDelay: {
        count: loopDelay.count,
        min: loopDelay.min / 1e6,
        p50: loopDelay.percentile(50) / 1e6,
        p90: loopDelay.percentile(90) / 1e6,
        p99: loopDelay.percentile(99) / 1e6,
        max: loopDelay.max / 1e6,
      },
    };
  } finally {
    abort.abort();
    // A subscriber failure has already surfaced through `ended`, or the
    // measurement finished without it; either way it must not mask the result.
    await subscriber.catch(() => undefined);
  }
}
