import { comparePositions, LogPosition } from '../domain/shared/event';

/** How often the idle loops' one look at the log's head is made. */
export const HEAD_POLL_MS = 250;

/**
 * How long an idle loop waits when neither an append's signal nor the look
 * at the head wakes it: a bound on what a fault of this watch could cost.
 */
const QUIET_MS = 10_000;

interface Waiter {
  /** The checkpoint the loop last saw committed; undefined before its first batch. */
  known: () => LogPosition | undefined;
  wake: () => void;
}

/**
 * Wakes idle projector loops when the log holds an event after the
 * checkpoint each last saw. A loop used to look for itself every
 * HEAD_POLL_MS, a transaction of its own each time (lock, checkpoint,
 * read, commit): with a dozen projectors, some fifty statements a second
 * on a server at rest. One statement per HEAD_POLL_MS now asks for the
 * last event committed, past the readers' horizon or not, for all of them.
 *
 * An append's signal still wakes the loops at once; the look is what finds
 * an event whose signal never came (a lost LISTEN connection) or one held
 * behind the horizon by an older transaction that signals nothing when it
 * ends. The log is ordered by transaction id, so a checkpoint never passes
 * an event still to commit: anything a loop has not applied lies after it.
 */
export class LogHeadWatch {
  private readonly waiting = new Set<Waiter>();
  private timer: NodeJS.Timeout | null = null;
  private looking = false;

  constructor(
    /** The last event committed, whether readers may see it yet or not. */
    private readonly head: () => Promise<LogPosition | null>,
    /** The event store's waitForAppend. */
    private readonly appended: (
      timeoutMs: number,
      signal: AbortSignal,
      since?: number,
    ) => Promise<void>,
    private readonly pollMs = HEAD_POLL_MS,
  ) {}

  /**
   * Resolves when an append is signalled (since `since`, an appendMark), the
   * log's head lies past `known()`, or `signal` aborts.
   */
  async wait(
    known: () => LogPosition | undefined,
    signal: AbortSignal,
    since?: number,
  ): Promise<void> {
    if (signal.aborted) return;
    const found = new AbortController();
    const wake = () => found.abort();
    signal.addEventListener('abort', wake, { once: true });
    const waiter = { known, wake };
    this.waiting.add(waiter);
    this.schedule();
    try {
      await this.appended(QUIET_MS, found.signal, since);
    } finally {
      this.waiting.delete(waiter);
      signal.removeEventListener('abort', wake);
      if (this.waiting.size === 0 && this.timer !== null) {
        clearTimeout(this.timer);
        this.timer = null;
      }
    }
  }

  private schedule(): void {
    if (this.timer !== null || this.looking || this.waiting.size === 0) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.look();
    }, this.pollMs);
  }

  private async look(): Promise<void> {
    let head: LogPosition | null | undefined;
    this.looking = true;
    try {
      head = await this.head();
    } catch {
      // The database is unreachable, most likely: the loops' own batches
      // meet the failure and back off as they do for any other.
      head = undefined;
    } finally {
      this.looking = false;
    }
    for (const w of [...this.waiting]) {
      const known = w.known();
      if (
        head === undefined ||
        (head !== null && (known === undefined || comparePositions(head, known) > 0))
      ) {
        w.wake();
      }
    }
    this.schedule();
  }
}
