import type { LRUCache } from 'lru-cache';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { CommandContext, DomainEvent, LogPosition, metadataFor } from '../domain/shared/event';
import { currentSchemaVersion } from '../domain/shared/upcasting';
import { Decider } from '../domain/shared/decider';
import { WrongExpectedRevisionError } from '../domain/shared/concurrency-error';
import { DomainError } from '../domain/shared/domain-error';
import type { Ids } from './ports/clock.port';
import type {
  AppendResult,
  EventStore,
  EventToAppend,
  ExpectedRevision,
  StreamRevision,
} from './ports/event-store.port';
import type { SnapshotStore } from './ports/snapshot-store.port';
import { textInTurns } from './in-turns';
import { boundedCache, DEFAULT_CACHE_BUDGETS } from './bounded-cache';

export interface AggregateOptions<S> {
  /** Event ids: one per decided event, kept if the same append is sent again. */
  ids: Ids;
  /** Shape id for snapshots; bump it when the state's shape changes. */
  snapshotSchema: string;
  toSnapshot(state: S): unknown;
  /**
   * The same snapshot as JSON text in pieces (joined, `JSON.stringify` of
   * `toSnapshot`), for a state whose text is too long to build in one turn
   * of the event loop: the store lets other work run between pieces.
   */
  toSnapshotText?(state: S): Iterable<string>;
  fromSnapshot(json: unknown): S;
  /** Write a snapshot once this many events have accumulated past the last one. */
  snapshotEvery?: number;
  /**
   * How many events a snapshot of this state is worth, when more than
   * `snapshotEvery`: a state whose snapshot grows with it (every address of
   * a big Terraform state) is snapshotted once as many events as it holds
   * entries have accumulated, so writing snapshots costs a constant per event
   * and a cold load replays at most about as much as the snapshot holds.
   */
  snapshotSpacing?(state: S): number;
  /** How many streams to keep warm in memory (CacheBudgets). */
  cacheSize?: number;
  /** Attempts on a concurrent write before giving up. */
  maxAttempts?: number;
  /** Told of a snapshot that could not be written (the command was answered long before). */
  snapshotFailed?(streamId: string, err: unknown): void;
}

export interface HandleResult<S, E> {
  events: E[];
  state: S;
  /** Position of the last event appended; null when the command changed nothing. */
  position: LogPosition | null;
  /**
   * What the read models must include before the answer is true: the last
   * event appended or, for a command that changed nothing (a retry), the
   * stream's last event. Null for a stream that does not exist.
   */
  readAt: LogPosition | null;
}

/** What handling one command cost besides deciding: filled in as it runs. */
export interface HandleProbe {
  /** Waiting behind earlier commands on the same stream in this process. */
  queueSeconds: number;
  /** Appends lost to a concurrent writer, decided again. */
  conflicts: number;
  /**
   * Settles once the command has answered (its read models caught up): a
   * snapshot the command makes due waits for it, so serialising and writing
   * a big state does not compete with the catch-up the answer waits for.
   * Without it the snapshot starts as soon as the command has appended.
   */
  answered?: Promise<unknown>;
}

/** An aggregate's state and the revision of the last event folded into it (null: no stream). */
export interface StateAt<S> {
  state: S;
  revision: bigint | null;
}

interface Loaded<S> {
  state: S;
  revision: bigint | null; // null: the stream does not exist
  snapshotRevision: bigint | null;
}

/**
 * Loads an aggregate from a warm cache (or a snapshot) plus the tail of its
 * stream, runs the decider, and appends with the revision it decided on. A
 * concurrent writer makes the append fail; we then reload the tail and decide
 * again, so the loser sees the winner's events (e.g. the lock it now holds).
 */
export class AggregateStore<C, S, E extends DomainEvent> {
  private readonly cache: LRUCache<string, Loaded<S>>;
  /** Tail of the queue of commands per stream in this process. */
  private readonly queues = new Map<string, Promise<unknown>>();
  /** Snapshots being written, by stream: at most one per stream. */
  private readonly snapshotting = new Map<string, Promise<void>>();
  /** Those past their command's answer: what snapshotsWritten waits for. */
  private readonly writing = new Set<Promise<void>>();
  /** stopSnapshots was called: a snapshot whose command answers later is not written. */
  private stopping = false;

  constructor(
    private readonly events: EventStore,
    private readonly snapshots: SnapshotStore,
    private readonly decider: Decider<C, S, E>,
    private readonly options: AggregateOptions<S>,
  ) {
    this.cache = boundedCache<Loaded<S>>(options.cacheSize ?? DEFAULT_CACHE_BUDGETS.streams);
  }

  /**
   * Commands for one stream run one at a time in this process (they would
   * only conflict with each other); replicas still race, and the loser of a
   * race retries after a short random pause. With `alsoAt`, the append also
   * requires that other stream where the command's inputs were read from it;
   * when it has moved, the WrongExpectedRevisionError naming it is thrown, not
   * retried: the caller reads it again and sends a new command.
   */
  handle(
    streamId: string,
    command: C,
    ctx: CommandContext,
    probe: HandleProbe = { queueSeconds: 0, conflicts: 0 },
    alsoAt?: StreamRevision,
  ): Promise<HandleResult<S, E>> {
    const previous = this.queues.get(streamId) ?? Promise.resolve();
    const queued = performance.now();
    const start = () => {
      probe.queueSeconds = (performance.now() - queued) / 1000;
      return this.decideAndAppend(streamId, command, ctx, probe, alsoAt);
    };
    const run = previous.then(start, start);
    const tail = run.catch(() => undefined);
    this.queues.set(streamId, tail);
    void tail.then(() => {
      if (this.queues.get(streamId) === tail) this.queues.delete(streamId);
    });
    return run;
  }

  private async decideAndAppend(
    streamId: string,
    command: C,
    ctx: CommandContext,
    probe: HandleProbe,
    alsoAt: StreamRevision | undefined,
  ): Promise<HandleResult<S, E>> {
    const attempts = this.options.maxAttempts ?? 30;
    // A warm stream is decided on as this process last left it, without
    // reading its tail: an append carries the revision it was decided on, so
    // one that another writer got ahead of is refused and decided again on
    // the tail. An answer without an append (nothing to do, or a refusal)
    // has no such check: it is given only on the tail just read.
    let fromCache = this.cache.get(streamId);
    // What the warm state decided when that was no append: when the tail adds
    // nothing, the state is the same and so is the decision (a 409 naming
    // 10,000 holders is not decided twice).
    let onWarm: { state: S; refusal: unknown } | { state: S; events: E[] } | undefined;
    for (let attempt = 1; ; attempt++) {
      const cached = fromCache;
      fromCache = undefined;
      const loaded = cached ?? (await this.load(streamId));
      let events: E[];
      if (onWarm !== undefined && onWarm.state === loaded.state) {
        if ('refusal' in onWarm) throw onWarm.refusal;
        events = onWarm.events;
      } else {
        try {
          events = this.decider.decide(command, loaded.state);
        } catch (err) {
          if (cached === undefined) throw err;
          onWarm = { state: cached.state, refusal: err };
          continue;
        }
      }
      if (events.length === 0 && cached !== undefined) {
        onWarm = { state: cached.state, events };
        continue;
      }
      if (events.length === 0) {
        return {
          events,
          state: loaded.state,
          position: null,
          readAt: await this.positionOf(streamId, loaded.revision),
        };
      }
      try {
        const metadata = metadataFor(ctx);
        const result = await this.append(
          streamId,
          events.map((e) => ({
            eventId: this.options.ids.uuid(),
            type: e.type,
            schemaVersion: currentSchemaVersion(e.type),
            data: e.data,
            metadata,
          })),
          loaded.revision ?? 'no_stream',
          alsoAt,
        );
        const state = events.reduce((s, e) => this.decider.evolve(s, e), loaded.state);
        const next: Loaded<S> = {
          state,
          revision: result.nextExpectedRevision,
          snapshotRevision: loaded.snapshotRevision,
        };
        this.remember(streamId, next);
        this.snapshotLater(streamId, next, probe.answered);
        return { events, state, position: result.position, readAt: result.position };
      } catch (err) {
        if (
          err instanceof WrongExpectedRevisionError &&
          err.metadata.streamId === streamId &&
          attempt < attempts
        ) {
          probe.conflicts++;
          this.cache.delete(streamId);
          // Racing writers step apart; a stale cache is only read again.
          if (cached === undefined) {
            await new Promise((r) => setTimeout(r, Math.random() * Math.min(50, 2 * attempt)));
          }
          continue;
        }
        throw err;
      }
    }
  }

  /**
   * An append that failed for want of an answer (a dropped connection, a
   * restarting server) may have been stored all the same: it is sent once
   * more exactly as it was, and the store recognises a stored one by its
   * event ids and answers as it did. A refusal (a DomainError such as a
   * conflict) or a bug in the events (TypeError) is not retried.
   */
  private async append(
    streamId: string,
    events: EventToAppend[],
    expectedRevision: ExpectedRevision,
    alsoAt: StreamRevision | undefined,
  ): Promise<AppendResult> {
    const options = { expectedRevision, ...(alsoAt ? { alsoAt } : {}) };
    try {
      return await this.events.appendToStream(streamId, events, options);
    } catch (err) {
      if (err instanceof DomainError || err instanceof TypeError) throw err;
      return this.events.appendToStream(streamId, events, options);
    }
  }

  private async positionOf(streamId: string, revision: bigint | null): Promise<LogPosition | null> {
    if (revision === null) return null;
    const [event] = await this.events.readStream(streamId, { fromRevision: revision, maxCount: 1 });
    return event?.position ?? null;
  }

  /** Current state without deciding anything (for reads that need the aggregate). */
  async state(streamId: string): Promise<S> {
    return (await this.load(streamId)).state;
  }

  /** Current state and its revision, read from the stream's tail (as `state`). */
  async stateAt(streamId: string): Promise<StateAt<S>> {
    const { state, revision } = await this.load(streamId);
    return { state, revision };
  }

  /**
   * The state this process last saw, without reading anything; null when the
   * stream is not warm. It may be behind: only for a command whose append
   * names its revision (`handle`'s `alsoAt`).
   */
  warmState(streamId: string): StateAt<S> | null {
    const warm = this.cache.get(streamId);
    return warm ? { state: warm.state, revision: warm.revision } : null;
  }

  private async load(streamId: string): Promise<Loaded<S>> {
    let base = this.cache.get(streamId);
    const warm = base !== undefined;
    if (!base) {
      base = (await this.fromSnapshot(streamId)) ?? {
        state: this.decider.initialState(),
        revision: null,
        snapshotRevision: null,
      };
    }
    const fromRevision = base.revision === null ? 0n : base.revision + 1n;
    const tail = await this.events.readStream(streamId, { fromRevision });
    if (tail.length === 0) {
      // Kept warm even when nothing followed the snapshot, or when the stream
      // does not exist yet (the quota rules' stream, read by every lock and
      // commit): the next load reads only the tail, not the snapshot again.
      if (!warm) this.remember(streamId, base);
      return base;
    }
    let state = base.state;
    for (const e of tail) state = this.decider.evolve(state, e as unknown as E);
    const loaded = {
      state,
      revision: tail[tail.length - 1].streamRevision,
      snapshotRevision: base.snapshotRevision,
    };
    this.remember(streamId, loaded);
    return loaded;
  }

  /**
   * The stream's snapshot, or null without a usable one: a snapshot is only
   * a shortcut, so one of another shape or one that cannot be read
   * (SNAPSHOT.INVALID) means replaying the stream from its start.
   */
  private async fromSnapshot(streamId: string): Promise<Loaded<S> | null> {
    const snap = await this.snapshots.load(streamId);
    if (!snap || snap.schema !== this.options.snapshotSchema) return null;
    try {
      const state = this.options.fromSnapshot(snap.state);
      return { state, revision: snap.revision, snapshotRevision: snap.revision };
    } catch (err) {
      if (err instanceof DomainError && err.code === 'SNAPSHOT.INVALID') return null;
      throw err;
    }
  }

  private remember(streamId: string, loaded: Loaded<S>): void {
    this.cache.set(streamId, loaded);
  }

  /**
   * Writes a snapshot of `loaded` when one is due, after the command has
   * answered (`answered`, then the next turn of the event loop, so the answer
   * is written first): serialising a big state and its write are never on a
   * command's path, nor beside the catch-up of the read models it waits for.
   * Its text is built one piece per turn (snapshotText), so requests that
   * arrive meanwhile, on any stream, are not held behind it. The state is
   * immutable (evolve returns new states), so a snapshot taken later is
   * still exactly the fold of the events up to its revision, whatever
   * commands ran meanwhile, and the store never puts it over a newer one.
   * The events are durable already: a snapshot that fails to build or save
   * is only a slower load later.
   */
  private snapshotLater(
    streamId: string,
    loaded: Loaded<S>,
    answered: Promise<unknown> = Promise.resolve(),
  ): void {
    const every = BigInt(
      Math.max(
        this.options.snapshotEvery ?? 200,
        this.options.snapshotSpacing?.(loaded.state) ?? 0,
      ),
    );
    const since = loaded.revision! - (loaded.snapshotRevision ?? -1n);
    if (since < every || this.snapshotting.has(streamId)) return;
    const { state } = loaded;
    const revision = loaded.revision!;
    const write = () =>
      this.snapshotText(state)
        .then((json) =>
          this.snapshots.save(streamId, { revision, schema: this.options.snapshotSchema, json }),
        )
        .then(() => {
          // Later commands copied the old snapshot revision into their entries.
          for (const entry of [loaded, this.cache.peek(streamId)]) {
            if (entry && (entry.snapshotRevision ?? -1n) < revision)
              entry.snapshotRevision = revision;
          }
        });
    const task = answered
      .catch(() => undefined)
      .then(() => {
        // Stopping: a command still waiting for its read models when kld began
        // to stop answers only once the stop has cut their catch-up short,
        // which comes after kld waits for the snapshots (stopSnapshots).
        if (this.stopping) return;
        const writing = write();
        this.writing.add(writing);
        return writing.finally(() => this.writing.delete(writing));
      })
      .catch((err: unknown) => this.options.snapshotFailed?.(streamId, err))
      .finally(() => this.snapshotting.delete(streamId));
    this.snapshotting.set(streamId, task);
  }

  /**
   * The snapshot's JSON text, each piece built in a turn of the event loop
   * of its own: other requests' I/O runs between pieces (the text of a
   * 20,000-instance state, built at once, held kld for tens of ms).
   */
  private async snapshotText(state: S): Promise<string> {
    const { toSnapshot, toSnapshotText } = this.options;
    const text =
      toSnapshotText?.(state) ??
      (function* () {
        yield JSON.stringify(toSnapshot(state));
      })();
    // Not in the turn that answered the commit either.
    await nextTurn();
    return textInTurns(text);
  }

  /** Resolves once the snapshots due now are written (or failed). */
  async snapshotsWritten(): Promise<void> {
    while (this.snapshotting.size > 0) await Promise.all([...this.snapshotting.values()]);
  }

  /**
   * As kld stops, before the database closes: resolves once the snapshots
   * being written are. One whose command has not answered yet is not
   * written: that command may be waiting for read models only the stop
   * cuts short, later (a snapshot not written is only a slower load).
   */
  async stopSnapshots(): Promise<void> {
    this.stopping = true;
    while (this.writing.size > 0) await Promise.allSettled([...this.writing]);
  }
}
