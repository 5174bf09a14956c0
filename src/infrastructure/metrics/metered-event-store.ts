import type {
  AppendResult,
  EventStore,
  EventToAppend,
  ExpectedRevision,
  StreamRevision,
} from '../../application/ports/event-store.port';
import { WrongExpectedRevisionError } from '../../domain/shared/concurrency-error';
import type { PrometheusMetrics } from './prometheus-metrics';

/** The event store, with every append timed and counted; reads pass straight through. */
export function meteredEventStore(store: EventStore, metrics: PrometheusMetrics): EventStore {
  return {
    async appendToStream(
      streamId: string,
      events: EventToAppend[],
      options: { expectedRevision: ExpectedRevision; alsoAt?: StreamRevision },
    ): Promise<AppendResult> {
      const end = metrics.appendDuration.startTimer();
      try {
        const result = await store.appendToStream(streamId, events, options);
        end({ outcome: 'ok' });
        // Counted per type, not per event: a first commit is tens of thousands.
        const byType = new Map<string, number>();
        for (const e of events) byType.set(e.type, (byType.get(e.type) ?? 0) + 1);
        for (const [type, n] of byType) metrics.eventsAppended.inc({ type }, n);
        return result;
      } catch (err) {
        end({ outcome: err instanceof WrongExpectedRevisionError ? 'conflict' : 'error' });
        throw err;
      }
    },
    readStream: (streamId, options) => store.readStream(streamId, options),
    readAll: (from, limit, types) => store.readAll(from, limit, types),
    readLog: (from, limit) => store.readLog(from, limit),
    readAppended: (from, limit, types) => store.readAppended(from, limit, types),
    heldAppend: (transactionId) => store.heldAppend(transactionId),
    releaseAppends: (position) => store.releaseAppends(position),
    watchAppends: (listener) => store.watchAppends(listener),
    readAt: (position) => store.readAt(position),
    lastPosition: () => store.lastPosition(),
    headPosition: () => store.headPosition(),
    contains: (position) => store.contains(position),
    waitForAppend: (timeoutMs, signal, since) => store.waitForAppend(timeoutMs, signal, since),
    appendMark: () => store.appendMark(),
    subscribe: (from, signal) => store.subscribe(from, signal),
  };
}
