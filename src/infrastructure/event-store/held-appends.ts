import { comparePositions, LogPosition, RecordedEvent } from '../../domain/shared/event';

/**
 * The events of the appends this process committed lately, as recorded (with
 * their positions), so that the projectors of the same process can take them
 * from memory instead of reading back what was just written. Each entry is one
 * append, i.e. one transaction and all of its events, in log order. Bounded by
 * a number of events: the oldest appends go first, and readers fall back to
 * reading the log, which is always exact.
 */
export class HeldAppends {
  /** In the order they were committed (not necessarily log order). */
  private readonly appends: RecordedEvent[][] = [];
  private held = 0;

  constructor(private readonly budget: number) {}

  hold(events: RecordedEvent[]): void {
    if (events.length === 0 || events.length > this.budget) return;
    this.appends.push(events);
    this.held += events.length;
    while (this.held > this.budget) this.held -= this.appends.shift()!.length;
  }

  /**
   * The held events that would come right after `from` if nothing else were
   * in the log: the rest of the append `from` is in, or else the whole held
   * append that starts first after it. Whether nothing else is in between is
   * for the caller to find out.
   */
  after(from: LogPosition): RecordedEvent[] | null {
    let best: RecordedEvent[] | null = null;
    let start = 0;
    for (const events of this.appends) {
      if (comparePositions(events[events.length - 1].position, from) <= 0) continue;
      const i = firstAfter(events, from);
      if (best === null || comparePositions(events[i].position, best[start].position) < 0) {
        best = events;
        start = i;
      }
    }
    return best === null ? null : best.slice(start);
  }

  /** Every event of the append committed in `transactionId`, or null when not held. */
  ofTransaction(transactionId: bigint): readonly RecordedEvent[] | null {
    return this.appends.find((a) => a[0].position.transactionId === transactionId) ?? null;
  }

  /** Lets go of the appends that end at or before `position`. */
  release(position: LogPosition): void {
    for (let i = this.appends.length - 1; i >= 0; i--) {
      const events = this.appends[i];
      if (comparePositions(events[events.length - 1].position, position) <= 0) {
        this.appends.splice(i, 1);
        this.held -= events.length;
      }
    }
  }

  /** Events held now (for tests and metrics). */
  size(): number {
    return this.held;
  }
}

/** Index of the first event after `from` in `events` (sorted, its last one after `from`). */
function firstAfter(events: RecordedEvent[], from: LogPosition): number {
  let lo = 0;
  let hi = events.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (comparePositions(events[mid].position, from) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
