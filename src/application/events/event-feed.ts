import { setImmediate as nextTurn } from 'node:timers/promises';
import { stateNameOf, stateOfStreamId } from '../../domain/events/event-catalogue';
import { DomainError } from '../../domain/shared/domain-error';
import { comparePositions, LOG_START, LoggedEvent, LogPosition } from '../../domain/shared/event';
import { EVENTS_INVALID_POSITION, formatCursor } from '../../domain/shared/log-cursor';
import { SharedTurns } from '../in-turns';
import type { EventStore } from '../ports/event-store.port';
import { EventFilter } from './event-filter';
import { eventBytes } from './event-size';
import { SharedPages } from './shared-pages';

export const EVENT_FEED = Symbol('EventFeed');

export type FeedItem =
  | { kind: 'event'; event: LoggedEvent }
  /** Consecutive matching events (only when the request asked for batches). */
  | { kind: 'events'; events: LoggedEvent[] }
  /** Every event up to `position` was delivered; from here on events come live. */
  | { kind: 'caught-up'; position: LogPosition }
  /** Events up to `position` did not match the filter: resume from here. */
  | { kind: 'checkpoint'; position: LogPosition };

export interface FeedRequest {
  /** Exclusive: the first event delivered is the one after it. */
  from: LogPosition | 'start' | 'end';
  filter: EventFilter;
  /** Keep going live after catching up (Subscribe), or end there (Read). */
  follow: boolean;
  /** Filtered feeds send a checkpoint at most this often when they passed over events. */
  checkpointEveryMs?: number;
  /** At most this many events, then the feed ends. */
  limit?: number;
  /**
   * Up to this many events per item (`events`); 1 or absent: one `event`
   * item each. Same events, same order, same markers either way.
   */
  batch?: number;
}

export interface EventFeedOptions {
  /** Events read from the log per query while catching up. */
  pageSize?: number;
  /** Events a live subscriber may have waiting before it falls back to reading the log. */
  liveBuffer?: number;
  /**
   * Bytes of event data a live subscriber may have waiting (one event always
   * fits): a count alone let a subscriber that stopped reading pin 10,000
   * events of a megabyte each.
   */
  liveBufferBytes?: number;
  /** Called when a live subscriber fell behind and went back to reading the log. */
  onFallBehind?: (position: LogPosition) => void;
  /**
   * Where consumers catching up read their pages (BULK_EVENT_STORE in kld);
   * the live tail keeps the store the feed was made with.
   */
  catchUp?: Pick<EventStore, 'readLog'>;
}

export const DEFAULT_CHECKPOINT_MS = 5000;
const STREAM_STATES_KEPT = 10_000;
/** Far above what honest consumers fall behind by; reading the log instead costs them only pace. */
export const DEFAULT_LIVE_BUFFER_BYTES = 64 * 1024 * 1024;
/**
 * Events (or bytes of their data, when they come as text) a consumer takes
 * in before kld's other work gets a turn (take, in EventFeed.run): a slice
 * is looked at and framed (SSE frames 100 events a write) in about a
 * millisecond, where a page of 1,000 held the loop for 10-50 ms.
 */
const EVENTS_PER_TURN = 100;
const BYTES_PER_TURN = 256 * 1024;
/**
 * Pages of consumers catching up that may be read or waiting for their
 * turns at once (SharedTurns.room): twice the bulk pool's connections. 256
 * readers of 12 KiB events each held a page of 12 MB waiting in line.
 */
const PAGES_AHEAD = 4;
/**
 * Full pages kept for consumers reading the same place of the log
 * (SharedPages): subscribers started together read each page once between
 * them, where each read and parsed its own.
 */
const PAGES_KEPT = 4;
const PAGE_BYTES_KEPT = 32 * 1024 * 1024;

/**
 * The event log, delivered to any number of consumers (gRPC, SSE) from any
 * position, each event once, in log order, through the same EventStore port
 * the projectors read.
 *
 * A consumer first catches up by reading the log page by page, only as fast
 * as it takes them. At the head it joins the live tail: one reader of the
 * log for the whole process, which hands every new event to each live
 * consumer's buffer. A buffer that fills (a consumer slower than the
 * writers) is dropped, and that consumer goes back to reading the log from
 * the last event it took, until it reaches the head again. So memory stays
 * bounded per consumer and nobody misses an event.
 */
export class EventFeed {
  private readonly pageSize: number;
  private readonly liveBuffer: number;
  private readonly liveBufferBytes: number;
  private readonly tail: LiveTail;
  private readonly catchUp: SharedPages;
  private readonly streamStates = new Map<string, string | null>();
  /** Shared by every consumer's slices (take, in run). */
  private readonly turns = new SharedTurns();
  private fellBehind = 0;
  private maxBuffered = 0;
  private maxBufferedBytes = 0;

  constructor(
    private readonly store: EventStore,
    private readonly options: EventFeedOptions = {},
  ) {
    this.pageSize = options.pageSize ?? 1000;
    this.liveBuffer = options.liveBuffer ?? 10_000;
    this.liveBufferBytes = options.liveBufferBytes ?? DEFAULT_LIVE_BUFFER_BYTES;
    this.tail = new LiveTail(store);
    this.catchUp = new SharedPages(options.catchUp ?? store, PAGES_KEPT, PAGE_BYTES_KEPT);
  }

  /**
   * Checks the request (a position must name an event of this log) before
   * anything is sent, so a transport can still refuse it; the events come
   * when the result is iterated. Aborting `signal` ends the iteration.
   */
  async open(request: FeedRequest, signal: AbortSignal): Promise<AsyncIterable<FeedItem>> {
    const start = await this.startOf(request.from);
    return {
      [Symbol.asyncIterator]: () => this.run(start, request, signal)[Symbol.asyncIterator](),
    };
  }

  /** How the live tail has been doing: for tests, benchmarks and logs. */
  stats(): { live: number; fellBehind: number; maxBuffered: number; maxBufferedBytes: number } {
    return {
      live: this.tail.size,
      fellBehind: this.fellBehind,
      maxBuffered: this.maxBuffered,
      maxBufferedBytes: this.maxBufferedBytes,
    };
  }

  async close(): Promise<void> {
    await this.tail.stop();
  }

  private async startOf(from: FeedRequest['from']): Promise<LogPosition> {
    if (from === 'start') return LOG_START;
    if (from === 'end') return (await this.store.lastPosition()) ?? LOG_START;
    if (comparePositions(from, LOG_START) === 0) return LOG_START;
    if (!(await this.store.contains(from))) {
      throw new DomainError(
        EVENTS_INVALID_POSITION,
        `position ${formatCursor(from)} is not in this log: it comes from another Kilolock, ` +
          'or from events lost when this database was restored from an older backup; ' +
          'read from the start, or from a position this log gave you',
      );
    }
    return from;
  }

  private async *run(
    start: LogPosition,
    request: FeedRequest,
    signal: AbortSignal,
  ): AsyncGenerator<FeedItem> {
    const { filter, follow } = request;
    const checkpointMs = request.checkpointEveryMs ?? DEFAULT_CHECKPOINT_MS;
    const limit = request.limit ?? Infinity;
    const batch = Math.max(1, request.batch ?? 1);
    let position = start;
    // When the feed first passed over an event since it last gave the
    // consumer a position (null: it has passed over none since).
    let passedSince: number | null = null;
    let sent = 0;
    let caughtUp = false;
    let live: LiveSubscriber | null = null;
    // Matching events not handed out yet: they go out together as soon as
    // the events at hand (a page, what the live buffer holds) are looked at,
    // and always before a marker, so batching never reorders or delays.
    let pending: LoggedEvent[] = [];
    // Checkpoints go out on ticks of the subscription's own clock, never
    // when an event is passed over: so a checkpoint tells a consumer that
    // the log moved in the last interval, not when an event it may not see
    // was written (or what it was: it carries a position only).
    const origin = Date.now();
    const tickAfter = (t: number) =>
      origin + (Math.floor((t - origin) / checkpointMs) + 1) * checkpointMs;

    const consider = async (event: LoggedEvent): Promise<void> => {
      position = event.position;
      if (await this.matches(event, filter)) {
        pending.push(event);
        sent++;
        // It goes out before any marker: the consumer gets its position.
        passedSince = null;
      } else {
        passedSince ??= Date.now();
      }
    };
    function* flush(): Generator<FeedItem> {
      if (pending.length === 0) return;
      const events = pending;
      pending = [];
      if (batch === 1) for (const event of events) yield { kind: 'event', event };
      else yield { kind: 'events', events };
    }
    /**
     * Takes in events at hand; false once the limit is reached (everything
     * flushed). A page is a thousand events: looked at, framed and written
     * by the consumer in one go, it held kld's loop for tens of ms, and a few
     * subscribers catching up kept it busy without a break, while commands'
     * statements waited for their answers to be read (docs/performance-history.md,
     * wave 22). So the events are taken in slices (EVENTS_PER_TURN,
     * BYTES_PER_TURN), and all the feed's consumers together take one slice
     * per turn of the loop (SharedTurns): the rest of kld waits behind one.
     * The rest of a page goes before other consumers' new pages: pages are
     * taken one after another, not all held half read at once. Batches are still what the events at hand make (a page's 1,000 at 300
     * go out as 300, 300, 300 and 100), framed in the slice that fills them.
     */
    const turns = this.turns;
    async function* take(events: readonly LoggedEvent[]): AsyncGenerator<FeedItem, boolean> {
      let slice = 0;
      let sliceBytes = 0;
      let begun = false;
      for (const event of events) {
        // Already delivered from the log while joining the live tail.
        if (comparePositions(event.position, position) <= 0) continue;
        if (slice === 0) {
          await turns.take(begun);
          begun = true;
        }
        if (signal.aborted) return false;
        await consider(event);
        if (pending.length >= batch || sent >= limit) yield* flush();
        if (sent >= limit) return false;
        sliceBytes += event.dataJson?.length ?? 0;
        if (++slice >= EVENTS_PER_TURN || sliceBytes >= BYTES_PER_TURN) {
          slice = 0;
          sliceBytes = 0;
        }
      }
      yield* flush();
      return true;
    }
    const checkpointDue = (): boolean =>
      filter.filters && passedSince !== null && Date.now() >= tickAfter(passedSince);
    // The consumer got a marker's position to resume from.
    const told = () => {
      passedSince = null;
    };

    try {
      while (!signal.aborted) {
        if (live === null) {
          // Pages read ahead wait in memory for their turns: a few at a time.
          const read = await this.turns.room(PAGES_AHEAD);
          let page: LoggedEvent[];
          try {
            page = await this.catchUp.readLog(position, this.pageSize);
          } finally {
            read();
          }
          if (!(yield* take(page))) return;
          if (page.length === this.pageSize) {
            if (checkpointDue()) {
              told();
              yield { kind: 'checkpoint', position };
            }
            // A consumer whose socket drains at once never waits otherwise:
            // kld's other requests get a turn between two pages.
            await nextTurn();
            continue;
          }
          // At the head, as of that read.
          if (!caughtUp) {
            caughtUp = true;
            told();
            yield { kind: 'caught-up', position };
          } else if (checkpointDue()) {
            told();
            yield { kind: 'checkpoint', position };
          }
          if (!follow) return;
          live = new LiveSubscriber(this.liveBuffer, this.liveBufferBytes);
          const joinedAt = this.tail.join(live, position);
          // The tail hands over what follows `joinedAt`; what lies between
          // here and there comes from the log.
          while (comparePositions(position, joinedAt) < 0 && !signal.aborted) {
            const gap = await this.catchUp.readLog(position, this.pageSize);
            // The tail read up to there, so the log has it: only a moment's wait.
            if (gap.length === 0) await new Promise((r) => setTimeout(r, 20));
            if (!(yield* take(gap))) return;
          }
          continue;
        }

        const wait =
          filter.filters && passedSince !== null
            ? Math.max(0, tickAfter(passedSince) - Date.now())
            : null;
        const next = await live.take(batch, wait, signal);
        if (next === 'overflow') {
          this.fellBehind++;
          this.options.onFallBehind?.(position);
          this.tail.leave(live);
          live = null;
          continue;
        }
        this.maxBuffered = Math.max(this.maxBuffered, live.highWater);
        this.maxBufferedBytes = Math.max(this.maxBufferedBytes, live.highWaterBytes);
        if (next !== null && !(yield* take(next))) return;
        if (checkpointDue()) {
          told();
          yield { kind: 'checkpoint', position };
        }
      }
    } finally {
      if (live) this.tail.leave(live);
    }
  }

  private async matches(event: LoggedEvent, filter: EventFilter): Promise<boolean> {
    // A run stream names its state in its first event: remember it when it passes.
    if (event.streamRevision === 0n && stateOfStreamId(event.streamId) === undefined) {
      this.remember(event.streamId, stateNameOf(event.data));
    }
    if (!filter.matchesEvent(event)) return false;
    if (!filter.needsState) return true;
    return filter.matchesState(await this.stateOf(event.streamId));
  }

  private async stateOf(streamId: string): Promise<string | null> {
    const inId = stateOfStreamId(streamId);
    if (inId !== undefined) return inId;
    const known = this.streamStates.get(streamId);
    if (known !== undefined) return known;
    const [first] = await this.store.readStream(streamId, { maxCount: 1 });
    const state = first ? stateNameOf(first.data) : null;
    this.remember(streamId, state);
    return state;
  }

  private remember(streamId: string, state: string | null): void {
    this.streamStates.delete(streamId);
    this.streamStates.set(streamId, state);
    if (this.streamStates.size > STREAM_STATES_KEPT) {
      this.streamStates.delete(this.streamStates.keys().next().value as string);
    }
  }
}

interface SizedEvent {
  event: LoggedEvent;
  bytes: number;
}

/** One live consumer's buffer of events the tail handed over. */
class LiveSubscriber {
  private queue: SizedEvent[] = [];
  private head = 0;
  private bytes = 0;
  private wake: (() => void) | null = null;
  overflowed = false;
  /** Most events ever waiting at once. */
  highWater = 0;
  /** Most bytes ever waiting at once. */
  highWaterBytes = 0;

  constructor(
    private readonly capacity: number,
    private readonly capacityBytes: number,
  ) {}

  /** From the tail. Returns false when the buffer is full: the tail drops this subscriber. */
  push(sized: SizedEvent): boolean {
    if (this.overflowed) return false;
    const waiting = this.queue.length - this.head;
    if (
      waiting >= this.capacity ||
      (waiting > 0 && this.bytes + sized.bytes > this.capacityBytes)
    ) {
      this.drop();
      return false;
    }
    this.queue.push(sized);
    this.bytes += sized.bytes;
    this.highWater = Math.max(this.highWater, waiting + 1);
    this.highWaterBytes = Math.max(this.highWaterBytes, this.bytes);
    this.wake?.();
    return true;
  }

  /** Sends the subscriber back to reading the log, freeing what it buffered. */
  drop(): void {
    this.overflowed = true;
    this.queue = [];
    this.head = 0;
    this.bytes = 0;
    this.wake?.();
  }

  /**
   * The next events waiting, at most `max`; 'overflow' once the buffer
   * overflowed; null when `waitMs` passed (or the signal aborted) with
   * nothing new.
   */
  async take(
    max: number,
    waitMs: number | null,
    signal: AbortSignal,
  ): Promise<LoggedEvent[] | 'overflow' | null> {
    for (;;) {
      if (this.overflowed) return 'overflow';
      if (this.head < this.queue.length) {
        const taken = this.queue.slice(this.head, this.head + max);
        this.head += taken.length;
        const events: LoggedEvent[] = [];
        for (const { event, bytes } of taken) {
          events.push(event);
          this.bytes -= bytes;
        }
        // Compact now and then rather than shift() every time.
        if (this.head > 1024 && this.head * 2 > this.queue.length) {
          this.queue = this.queue.slice(this.head);
          this.head = 0;
        }
        return events;
      }
      if (signal.aborted) return null;
      const woke = await new Promise<boolean>((resolve) => {
        const done = (value: boolean) => {
          if (timer) clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          this.wake = null;
          resolve(value);
        };
        const onAbort = () => done(false);
        const timer = waitMs === null ? null : setTimeout(() => done(false), waitMs);
        this.wake = () => done(true);
        signal.addEventListener('abort', onAbort, { once: true });
      });
      if (!woke) return null;
    }
  }
}

/**
 * The one live reader of the log per process (EventStore.subscribe, as the
 * projectors read it), running while anyone is live.
 */
class LiveTail {
  private readonly subscribers = new Set<LiveSubscriber>();
  private position: LogPosition | null = null;
  private abort: AbortController | null = null;
  private running: Promise<void> | null = null;

  constructor(private readonly store: EventStore) {}

  get size(): number {
    return this.subscribers.size;
  }

  /**
   * Adds a subscriber that has read the log up to `from`, and returns the
   * position after which the tail hands it events (the subscriber reads the
   * log up to there itself).
   */
  join(subscriber: LiveSubscriber, from: LogPosition): LogPosition {
    this.subscribers.add(subscriber);
    if (this.position === null) {
      this.position = from;
      this.start(from);
    }
    return this.position;
  }

  leave(subscriber: LiveSubscriber): void {
    this.subscribers.delete(subscriber);
    if (this.subscribers.size === 0) void this.stop();
  }

  async stop(): Promise<void> {
    this.abort?.abort();
    this.abort = null;
    this.position = null;
    await this.running;
  }

  private start(from: LogPosition): void {
    const abort = new AbortController();
    this.abort = abort;
    const previous = this.running ?? Promise.resolve();
    this.running = previous.then(async () => {
      try {
        for await (const event of this.store.subscribe(from, abort.signal)) {
          if (abort.signal.aborted) break;
          this.position = event.position;
          // Measured once per event, whatever the number of subscribers that buffer it.
          const sized = { event, bytes: eventBytes(event) };
          for (const s of [...this.subscribers]) {
            if (!s.push(sized)) this.subscribers.delete(s);
          }
        }
      } catch {
        // The log could not be read (the database went away): every live
        // subscriber goes back to reading the log itself, and fails there
        // if the database is still away.
        for (const s of this.subscribers) s.drop();
        this.subscribers.clear();
      } finally {
        if (this.abort === abort) {
          this.abort = null;
          this.position = null;
        }
      }
    });
  }
}
