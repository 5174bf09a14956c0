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
  private readonly appends: Held[] = [];
  private held = 0;

  constructor(private readonly budget: number) {}

  hold(events: RecordedEvent[]): void {
    if (events.length === 0 || events.length > this.budget) return;
    this.appends.push({ events, confirmed: new Set() });
    this.held += events.length;
    while (this.held > this.budget) this.held -= this.appends.shift()!.events.length;
  }

  /**
   * The held events that would come right after `from` if nothing else were
   * in the log: the rest of the append `from` is in, or else the whole held
   * append that starts first after it. Whether nothing else is in between is
   * for the caller to find out.
   */
  after(
    from: LogPosition,
  ): { events: RecordedEvent[]; confirmed: boolean; confirm: () => void } | null {
    let best: Held | null = null;
    let start = 0;
    for (const held of this.appends) {
      const { events } = held;
      if (comparePositions(events[events.length - 1].position, from) <= 0) continue;
      const i = firstAfter(events, from);
      if (best === null || comparePositions(events[i].position, best.events[start].position) < 0) {
        best = held;
        start = i;
      }
    }
    if (best === null) return null;
    const { confirmed } = best;
    return {
      events: best.events.slice(start),
      // From inside the append (an event of it is at or before `from`), its
      // next event is the log's next: every event of its transaction is held.
      confirmed: start > 0 || confirmed.has(key(from)),
      // That the log's next event after `from` is this one never changes once
      // seen (no transaction can commit an event before one already past the
      // horizon): asked once per position, not once per reader.
      confirm: () => confirmed.add(key(from)),
    };
  }

  /** Every event of the append committed in `transactionId`, or null when not held. */
  ofTransaction(transactionId: bigint): readonly RecordedEvent[] | null {
    const held = this.appends.find((h) => h.events[0].position.transactionId === transactionId);
    return held?.events ?? null;
  }

  /** Lets go of the appends that end at or before `position`. */
  release(position: LogPosition): void {
    for (let i = this.appends.length - 1; i >= 0; i--) {
      const { events } = this.appends[i];
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

interface Held {
  /** One append's events, in log order. */
  events: RecordedEvent[];
  /** Positions (`key`) whose next event in the log was found to be one of these. */
  confirmed: Set<string>;
}

function key(position: LogPosition): string {
  return `${position.transactionId}:${position.globalPosition}`;
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
