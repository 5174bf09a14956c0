import { EventSourceParserStream } from 'eventsource-parser/stream';
import { ApiError, query, request } from './api';

/**
 * Live updates: one subscription to kld's event feed (`GET /v1/events`,
 * docs/events.md) for the whole tab. `EventSource` cannot send the session's
 * bearer token, so the feed is read with fetch and parsed by
 * eventsource-parser. After a drop it resumes from the last position it got;
 * while it is down (no `events` scope, kld unreachable) the pages poll.
 */

/** What a page may react to: the feed's message, as docs/events.md describes it. */
export interface FeedEvent {
  type: string;
  stream: string;
}

export type FeedStatus =
  { kind: 'connecting' } | { kind: 'live' } | { kind: 'offline'; reason: string };

/**
 * The events the pages show the effect of. A version's lifecycle events
 * always come with its `ApplyCommitted`, so they are left out: a write to a
 * big state would otherwise send every changed instance to the browser.
 */
export const SHOWN_TYPES = [
  'StateCreated',
  'StateDeleted',
  'ApplyCommitted',
  'LockAcquired',
  'LockReleased',
  'ReservationAcquired',
  'ReservationReleased',
  'ReservationExpired',
  'RefreshStarted',
  'RefreshFinished',
  'ApplyStarted',
  'ApplyFinished',
] as const;

/** What changes a state's versions, so its history, resources and instances. */
export const VERSION_EVENTS = ['StateCreated', 'ApplyCommitted', 'StateDeleted'];
export const LOCK_EVENTS = ['LockAcquired', 'LockReleased', 'StateDeleted'];
export const REFRESH_EVENTS = ['RefreshStarted', 'RefreshFinished'];
export const APPLY_RUN_EVENTS = [
  'ApplyStarted',
  'ApplyFinished',
  'ReservationAcquired',
  'ReservationReleased',
  'ReservationExpired',
];

/** Nothing at all (a heartbeat comes every 15 s) for this long: the connection is dead. */
const SILENCE_MS = 40_000;
const RETRY_MS = [1000, 2000, 5000, 10_000, 30_000];

/** An event, or null: anything may have changed (the feed lost its place). */
type EventListener = (event: FeedEvent | null) => void;
type StatusListener = (status: FeedStatus) => void;

class LiveFeed {
  private status: FeedStatus = { kind: 'connecting' };
  private readonly events = new Set<EventListener>();
  private readonly statuses = new Set<StatusListener>();
  /** The state the current page is about (null: every state). */
  private state: string | null | undefined = undefined;
  /** The position of the last event, caught-up or checkpoint marker received. */
  private lastId: string | null = null;
  private connection: AbortController | null = null;
  private retry: ReturnType<typeof setTimeout> | null = null;
  private failures = 0;

  /** Follows the events of one state, or of every state (null); reconnects when it changes. */
  follow(state: string | null): void {
    if (state === this.state) return;
    this.state = state;
    this.connect();
  }

  onEvent(listener: EventListener): () => void {
    this.events.add(listener);
    return () => this.events.delete(listener);
  }

  onStatus(listener: StatusListener): () => void {
    this.statuses.add(listener);
    listener(this.status);
    return () => this.statuses.delete(listener);
  }

  current(): FeedStatus {
    return this.status;
  }

  private setStatus(status: FeedStatus): void {
    this.status = status;
    this.statuses.forEach((l) => l(status));
  }

  private connect(): void {
    this.connection?.abort();
    if (this.retry) clearTimeout(this.retry);
    this.retry = null;
    const connection = new AbortController();
    this.connection = connection;
    if (this.status.kind !== 'live') this.setStatus({ kind: 'connecting' });
    void this.read(connection).then(
      (why) => this.dropped(connection, why),
      (err: unknown) => this.dropped(connection, err),
    );
  }

  private async read(connection: AbortController): Promise<unknown> {
    const path = `/v1/events${query({
      // Only what happens after the page was loaded, unless resuming.
      from: this.lastId ?? 'end',
      state: this.state ?? undefined,
      type: SHOWN_TYPES.join(','),
    })}`;
    // A 401 here asks for no token: the page's own requests do that.
    const res = await request(path, { signal: connection.signal }, false);
    if (!res.body) return new Error('no body');
    let silence: ReturnType<typeof setTimeout> | undefined;
    const alive = () => {
      clearTimeout(silence);
      silence = setTimeout(
        () => connection.abort(new Error(`no word from kld for ${SILENCE_MS / 1000} s`)),
        SILENCE_MS,
      );
    };
    alive();
    const messages = res.body
      .pipeThrough(new TextDecoderStream())
      .pipeThrough(new EventSourceParserStream({ onComment: alive }))
      .getReader();
    try {
      for (;;) {
        const { done, value } = await messages.read();
        if (done) return new Error('the feed ended');
        alive();
        if (value.id) this.lastId = value.id;
        if (value.event === 'caught-up') {
          this.failures = 0;
          this.setStatus({ kind: 'live' });
        } else if (value.event === 'error') {
          return new Error(errorMessage(value.data));
        } else if (value.event === undefined) {
          const event = JSON.parse(value.data) as FeedEvent;
          this.events.forEach((l) => l(event));
        }
      }
    } finally {
      clearTimeout(silence);
      messages.cancel().catch(() => undefined);
    }
  }

  private dropped(connection: AbortController, why: unknown): void {
    // A connection replaced by another (a new page's filter) is not a drop.
    if (connection !== this.connection) return;
    if (why instanceof ApiError && why.code === 'EVENTS.INVALID_POSITION') {
      // The log no longer has our position (a restored database): start from now, and have
      // the pages read everything again since events may have been missed.
      this.lastId = null;
      this.events.forEach((l) => l(null));
    }
    if (why instanceof ApiError && (why.status === 401 || why.status === 403)) {
      // A token without the `events` scope: no use retrying until the token changes (a reload).
      this.setStatus({ kind: 'offline', reason: why.message });
      return;
    }
    const wait = RETRY_MS[Math.min(this.failures, RETRY_MS.length - 1)];
    this.failures++;
    this.setStatus({
      kind: 'offline',
      reason: `${why instanceof Error ? why.message : 'the feed stopped'}; trying again in ${wait / 1000} s`,
    });
    this.retry = setTimeout(() => this.connect(), wait);
  }
}

function errorMessage(data: string): string {
  try {
    const body = JSON.parse(data) as { message?: unknown };
    if (typeof body.message === 'string') return body.message;
  } catch {
    // not JSON
  }
  return 'the feed failed';
}

export const feed = new LiveFeed();
