import { setMaxListeners } from 'node:events';
import { escapeLiteral, Pool, PoolClient, QueryResult } from 'pg';
import { comparePositions, LogPosition, RecordedEvent } from '../domain/shared/event';
import { DomainError } from '../domain/shared/domain-error';
import type { AppendInFlight, EventStore } from '../application/ports/event-store.port';
import type { ReadModelSync } from '../application/ports/read-model-sync.port';
import {
  ProjectionAdmin,
  ProjectionHalt,
  ProjectionHaltedError,
} from '../application/ports/projection-admin.port';
import { Notifier } from '../infrastructure/postgres/notifier';
import { prepared } from '../infrastructure/postgres/prepared-statement';
import type { Logger } from '../infrastructure/logging/logger';
import { Database, type Queryable } from '../infrastructure/postgres/database';
import {
  SessionsStoppedError,
  StoppableSessions,
} from '../infrastructure/postgres/stoppable-sessions';
import {
  ownConnection,
  ReadModelsRebuildingError,
} from '../infrastructure/postgres/unlogged-read-models';
import { LogHeadWatch } from './log-head-watch';
import { Projector } from './projector';
import { RebuildRunningError } from './rebuild-running.error';
import { RebuildStoppedError } from './rebuild-stopped.error';
import {
  createShadowTables,
  dropShadowTables,
  SHADOW_SCHEMA,
  swapInShadowTables,
  useShadowTables,
} from './shadow-tables';

/**
 * What the batches of one projector in a writer's catch-up share: the
 * events they handled (statistics are refreshed once it is over) and its
 * turn among the projectors caught up side by side.
 */
interface Bulk {
  handled: number;
  /** Called once this projector's batch has started applying: the next one's turn. */
  applying?: () => void;
}

export const CHECKPOINTS_CHANNEL = 'kl_checkpoints';
/** Notified after a skip or a rebuild, from any process: halted projectors look again. */
export const MAINTENANCE_CHANNEL = 'kl_projection_maintenance';
const BATCH = 500;
/**
 * Held events a batch may pass over at once when none is of its projector's
 * types (passingOver): they are in memory already, and nothing is applied.
 */
const PASS_OVER = 100_000;
/**
 * Events in one batch that make its tables' statistics worth refreshing: a
 * first commit of a thousand instances too (without statistics, the few
 * closes of each delta after it read every live row of the state:
 * docs/performance-history.md, "The next-serial push (wave 14)"). Above BATCH, so a
 * loop's batches of a backlog do not refresh them one after another.
 */
const ANALYZE_AFTER = 1000;
/**
 * The sample those statistics are taken from (`default_statistics_target`,
 * 300 rows per unit, for this ANALYZE only): a tenth of PostgreSQL's
 * default. At the default, the ANALYZE after a first commit of 20,000
 * instances sorted every row's every column (jsonb included) and took one of
 * the two cores for 0.9-1.7 s while other callers' commands ran; at 10, 0.13-0.18 s
 * (docs/performance-history.md, wave 21). The planner needs row counts, null
 * fractions and distinct counts, which 3,000 rows give; autovacuum takes
 * fuller statistics later, at its own pace, once the tables have changed
 * enough.
 */
const BULK_STATISTICS_TARGET = 10;
// A writer waiting for its own events takes bigger bites: a first commit of
// a big state is tens of thousands of events, and every batch is a
// transaction of its own that re-reads the checkpoint.
const CATCH_UP_BATCH = 5000;
// The same writer takes events this process holds (its own appends, in
// memory already) in bites this big: a first commit of 20,000 instances is
// then one transaction per projector, not four or five one after the other
// (each with its commit's flush, and the lifecycles' COPYs strictly in a
// row). Reads of the log keep CATCH_UP_BATCH.
const HELD_CATCH_UP_BATCH = 25_000;
// Namespace for the per-projector advisory locks (pg_advisory_xact_lock(int, int)).
export const LOCK_NAMESPACE = 7_300_422;
// In that namespace: the session lock one rebuild holds from start to end.
const REBUILD_LOCK = 'kl:rebuild';
// A rebuild's own batches lock the shadow copies, never the live projector.
const shadowLock = (projector: Projector) => `kl:rebuild:${projector.name}`;
// How long the swap waits for a table a query is reading before it lets go
// (and readers queued behind it through) to try again; under PostgreSQL's
// default deadlock_timeout (1 s), so a reader stuck between the swap's locks
// is never the one cancelled.
const SWAP_LOCK_TIMEOUT_MS = 500;
// How long a rebuild keeps trying to swap before it gives up (queries run
// for at most 5 minutes).
const SWAP_PATIENCE_MS = 10 * 60_000;
/** How often a halted projector tries its event again, quietly. */
const RECHECK_MS = 30_000;
/** How far a projector may trail, over events it does not handle, and still count as caught up. */
const READY_LOOKAHEAD = 1000;
const MAX_BACKOFF_MS = 30_000;
// How long, and over how many events, a loop leaves its checkpoint behind
// appends of this process that hold no event it handles, while more keep
// coming (see deferrable). Under READY_LOOKAHEAD, so readiness is kept.
const DEFER_MS = 1000;
const DEFER_EVENTS = BATCH;
/**
 * A command's read models short of its events by at most this many catch up
 * in one transaction (together), taking at most this many events each: below
 * every projector's threshold for COPY (100 opens, 500 edges), which would
 * hold the shared connection through a stream.
 */
const TOGETHER_UP_TO = 50;
/**
 * Sent with the BEGIN of a command's read-model transaction (together) when
 * the read models are unlogged: its COMMIT is answered without waiting for
 * the WAL to reach the disk. What it writes is derived from the log, whose
 * append committed (and was flushed) before it, and its rows and checkpoints
 * commit or vanish together. A crash that loses the commit (a fraction of a
 * second of commits at most: the WAL writer flushes on its own, and the next
 * append's flush takes it along) empties the unlogged read models anyway, and
 * kld rebuilds every read model from the log, reads of them answering 503
 * meanwhile. Logged read models caught up in the same transaction (the
 * state's catalog and locks, the quotas) may show the state before the write
 * for the moment their projectors take to catch up after the recovery; none
 * decides anything (locks, reservations and quotas are decided on their
 * streams), and the tokens, which decide authentication, are fed by their
 * events alone, so never caught up together with another read model. Anything
 * durable decided after the write (a later append) commits after it in the
 * WAL, so its flush covers it. Visibility is the commit's, as ever. With
 * logged read models a crash keeps them as they were, so their commits keep
 * waiting for the flush: a GET after PostgreSQL's recovery must not find the
 * state a version behind.
 */
const READ_MODELS_COMMIT = 'SET LOCAL synchronous_commit TO off';
/**
 * How long an early transaction (applyEarly) waits for its append to commit,
 * and then for older transactions to end (readAll's horizon), before it
 * rolls back: meanwhile it holds its projector's lock, which every other
 * writer's batch of that projector waits for.
 */
const EARLY_COMMIT_MS = 10_000;
const EARLY_SETTLE_MS = 1000;
const EARLY_POLL_MS = 5;
/**
 * How long a projector's loop holds off, at most, while a bulk append of
 * this process is being written (inFlight).
 */
const IN_FLIGHT_WAIT_MS = EARLY_COMMIT_MS;
/**
 * How long after a bulk append of this process commits its writer has to
 * start catching up (waitForPosition) for the loops of the projectors it
 * does not feed to keep holding off until that catch-up is over (see
 * writersOf). The writer's aggregate evolves the events first (some tens of
 * milliseconds for a first commit of 20,000 instances); an append whose
 * writer never comes holds them off no longer than this.
 */
const WRITER_START_MS = 250;
/** How many times an early transaction tries for its lock (EARLY_POLL_MS apart) before it lets go. */
const EARLY_LOCK_TRIES = 20;

/**
 * What one batch of a projector did: the events it consumed (applied or
 * passed over), and whether more may follow right after them (`more`: it
 * stopped at a limit or before an event of its types), so its loop looks
 * again at once rather than waiting for the next append.
 */
interface Batch {
  consumed: number;
  more: boolean;
}

/** The read models lag: what a write answers as SERVER.LAGGING (awaitReadModels). */
export class ProjectionTimeoutError extends DomainError {
  constructor(position: LogPosition, timeoutMs: number) {
    super(
      'SERVER.LAGGING',
      `read models did not reach position ${position.globalPosition} within ${timeoutMs} ms`,
    );
    this.name = 'ProjectionTimeoutError';
  }
}

export interface ProjectionRunnerProps {
  /** Where the events come from. */
  events: EventStore;
  /** Where the read models and their checkpoints are. */
  db: Database;
  notifier: Notifier;
  logger: Logger;
  /** How often a halted projector tries its event again (default 30 s). */
  recheckMs?: number;
  /**
   * How long after a bulk append of this process commits its writer has to
   * start its catch-up for the other projectors' loops to wait for its end
   * (default 250 ms).
   */
  writerStartMs?: number;
  /**
   * The read models are unlogged (KL_UNLOGGED_READ_MODELS): a crash of
   * PostgreSQL empties them and kld rebuilds every one from the log, so a
   * command's read-model transaction need not wait for its WAL flush
   * (READ_MODELS_COMMIT). Default false: logged read models keep their
   * commits durable, as a crash leaves them as they were.
   */
  unloggedReadModels?: boolean;
}

/**
 * Runs every projector against the log. Any number of kld replicas may run it
 * at once: each batch takes the projector's transaction-scoped advisory lock,
 * re-reads the checkpoint under it and advances it compare-and-set, so two
 * replicas never apply the same batch twice.
 *
 * A batch that fails for a passing reason (the database went away, a
 * deadlock) is retried with backoff. One that fails otherwise is applied in
 * smaller batches down to the single event that fails: that projector then
 * halts there, says so once in the log and in `/readyz`, and tries the event
 * again only every `recheckMs` (it resumes when an operator skipped the event,
 * or another replica with a fix applied it). Other projectors keep going;
 * writes answer SERVER.LAGGING until it resumes.
 */
export class ProjectionRunner implements ProjectionAdmin, ReadModelSync {
  private readonly abort = new AbortController();
  /**
   * The connections of every batch, rebuild and statistics refresh: the stop
   * cancels what they run, and their transactions roll back.
   */
  private readonly sessions: StoppableSessions;
  private loops: Promise<void>[] = [];
  /** Work besides the loops the stop waits for: writers' catch-ups, statistics, a rebuild. */
  private readonly working = new Set<Promise<unknown>>();
  private readonly kicks = new Set<() => void>();
  private readonly analyzing = new Set<string>();
  private readonly analyzeAgain = new Set<string>();
  /**
   * Projectors a writer of this process is catching up (waitForPosition),
   * with how many writers: the projector's loop stands aside meanwhile.
   */
  private readonly catchingUp = new Map<string, number>();
  private readonly halts = new Map<string, ProjectionHalt>();
  /** The last passing failure logged per projector, so a flapping database logs once. */
  private readonly failing = new Map<string, string>();
  /**
   * Per projector, the checkpoint this process last saw committed (a batch
   * of its own ended there): where a loop looks from for appends it may
   * leave for later.
   */
  private readonly known = new Map<string, LogPosition>();
  private readonly recheckMs: number;
  private readonly writerStartMs: number;
  /** Sent with the BEGIN of a command's read-model transaction (together). */
  private readonly togetherSettings: string;
  private readonly events: EventStore;
  private readonly db: Database;
  private readonly notifier: Notifier;
  private readonly logger: Logger;
  private projectors: readonly Projector[] = [];
  /**
   * Per projector, its early transaction in flight (applyEarly): `done`
   * resolves to the events it handled once committed, null when it rolled
   * back; `claimed` once a writer's catch-up awaits it (and counts them for
   * the statistics it refreshes at its end).
   */
  private readonly early = new Map<string, { done: Promise<number | null>; claimed: boolean }>();
  /**
   * This process's bulk appends (watchAppends) from their start (being
   * written while their last event is unknown: inFlight) until their
   * writer's catch-up is over (a waitForPosition reaching their last event
   * ended), or until writerStartMs after their commit when no such catch-up
   * has started by then.
   */
  private readonly bulks = new Set<BulkAppend>();
  private readonly unwatch: () => void;
  /** Wakes idle loops (one look at the log's head for all of them). */
  private readonly headWatch: LogHeadWatch;

  constructor(props: ProjectionRunnerProps) {
    ({ events: this.events, db: this.db, notifier: this.notifier, logger: this.logger } = props);
    this.recheckMs = props.recheckMs ?? RECHECK_MS;
    this.writerStartMs = props.writerStartMs ?? WRITER_START_MS;
    this.togetherSettings = props.unloggedReadModels ? `; ${READ_MODELS_COMMIT}` : '';
    this.sessions = new StoppableSessions(() => ownConnection(this.db.url));
    this.headWatch = new LogHeadWatch(
      () => this.events.headPosition(),
      (ms, signal, since) => this.events.waitForAppend(ms, signal, since),
    );
    this.unwatch = this.events.watchAppends((append) => {
      this.trackInFlight(append);
      this.startEarly(append);
    });
  }

  /**
   * Adds projectors; before `start` and before any command waits on it (the
   * ProjectionsModule registers what it discovers at module init).
   */
  register(projectors: readonly Projector[]): this {
    if (this.loops.length > 0)
      throw new Error('projectors are registered before the runner starts');
    const all = [...this.projectors, ...projectors];
    const names = all.map((p) => p.name);
    const twice = names.find((name, i) => names.indexOf(name) !== i);
    if (twice !== undefined) throw new Error(`two projectors are named ${twice}`);
    this.projectors = all;
    return this;
  }

  /** Names of the registered projectors. */
  names(): string[] {
    return this.projectors.map((p) => p.name);
  }

  start(): void {
    // Each loop listens on the stop signal while it waits: one listener per
    // projector is the design, not a leak (Node warns past 10).
    setMaxListeners(10 + this.projectors.length, this.abort.signal);
    this.loops = this.projectors.map((p) => this.loop(p));
  }

  /**
   * Ends the projection at once: batches under way (a writer's catch-up of a
   * big commit, a loop's, an early one, a rebuild's, a statistics refresh)
   * are cancelled and roll back, each projector's rows with its checkpoint,
   * so the next start applies those events again. A stopping kld then waits
   * for a round trip, not for the projection of a big commit, which
   * outlasted its deadline (docs/operations.md).
   */
  async stop(): Promise<void> {
    this.unwatch();
    this.abort.abort();
    this.kick();
    const cut = await this.sessions.stop();
    if (cut > 0) {
      this.logger.info(
        { sessions: cut },
        'projection work cut short by the stop; the next start applies those events again',
      );
    }
    await Promise.allSettled([
      ...this.loops,
      ...[...this.early.values()].map((e) => e.done),
      ...this.working,
    ]);
  }

  /** Keeps `work` among what the stop waits for until it settles. */
  private track<T>(work: Promise<T>): Promise<T> {
    this.working.add(work);
    const untrack = () => this.working.delete(work);
    work.then(untrack, untrack);
    return work;
  }

  /** A transaction of projection work: the stop cancels it (see stop). */
  private transaction<T>(
    fn: (tx: PoolClient, opened: QueryResult[]) => Promise<T>,
    opening?: string,
  ): Promise<T> {
    return this.db.transaction(fn, opening, this.sessions);
  }

  /** A batch failed for a passing reason, or because the runner stops: no event is to blame. */
  private cutShort(err: unknown): boolean {
    return this.abort.signal.aborted || isPassing(err);
  }

  /** Wake the loops now instead of at their next poll (or recheck). */
  kick(): void {
    for (const k of [...this.kicks]) k();
  }

  /** Projectors stopped at an event they cannot apply. */
  halted(): ProjectionHalt[] {
    return [...this.halts.values()];
  }

  private async loop(projector: Projector): Promise<void> {
    const signal = this.abort.signal;
    let backoff = 0;
    // Set when an append signal (not a timeout or a kick) ended the idle wait.
    let woken = false;
    // What the loop has left for later: since when, through which event, how many.
    let deferred: Deferred | null = null;
    // Set once the loop has held off for appends in flight: its next look is
    // a batch, whatever is in flight then (appends one after another never
    // keep it from looking).
    let heldOff = false;
    // Set once the loop stood aside for a writer of this process catching
    // the projector up (catchingUp).
    let stoodAside = false;
    while (!signal.aborted) {
      if (this.halts.has(projector.name)) {
        await this.idle(signal, (wake) =>
          this.notifier.wait(MAINTENANCE_CHANNEL, this.recheckMs, wake),
        );
        if (!signal.aborted) await this.recheck(projector);
        continue;
      }
      if (this.catchingUp.has(projector.name)) {
        // A writer is applying these very events in big batches: a batch of
        // the loop's size in between would wait for its lock, then cut the
        // commit into one more transaction (and, for a first commit, a run
        // of opens too short for COPY).
        await this.idle(signal, (wake) => this.events.waitForAppend(250, wake));
        stoodAside = true;
        continue;
      }
      if (stoodAside) {
        // The writer took the projector to its events (and past them when
        // more were held): the loop looks once the log moves past where it
        // left it, not at once, when a read of the log would find nothing
        // beside the commit's answer and what its caller sends next.
        stoodAside = false;
        const mark = this.events.appendMark();
        const known = () => this.known.get(projector.name);
        await this.idle(signal, (wake) => this.headWatch.wait(known, wake, mark));
        woken = this.events.appendMark() !== mark;
        continue;
      }
      const writers = this.writersOf(projector);
      if (writers.length > 0) {
        // A bulk append of this process committed without an event of this
        // projector's types, and its writer is catching up the projectors
        // it does feed (or is about to: its aggregate's evolve comes
        // first). This loop's batch would pass over its events, with a
        // lock, a checkpoint's move and a commit, competing for the CPU
        // with that catch-up, which the writer's answer waits for: it
        // moves once the catch-up is over, the events still in memory.
        // Whatever woke the loop: the look at the log's head may find the
        // commit before its append's signal arrives.
        await this.idle(signal, (wake) =>
          settled(
            writers.map((b) => b.ended),
            wake,
          ),
        );
      }
      if (!heldOff && this.inFlight().length > 0) {
        // A bulk append of this process is being written: a look at the log
        // now finds none of it, and walks its uncommitted rows to say so
        // (about ten loops, every 250 ms, each some ms of PostgreSQL's CPU
        // beside the append: docs/performance-history.md, wave 15). The loop looks
        // once it is over, as its commit would have woken it.
        await this.idle(signal, (wake) =>
          settled(
            this.inFlight().map((b) => b.written),
            wake,
            IN_FLIGHT_WAIT_MS,
          ),
        );
        heldOff = true;
        woken = true;
        continue;
      }
      heldOff = false;
      const later: Deferred | null = woken ? await this.deferrable(projector, deferred) : null;
      if (later !== null) {
        // Every new event is one this projector passes over: moving its
        // checkpoint now would be a transaction and a commit per append,
        // beside the writer's own (three per `terraform state push`). It
        // moves once the appends pause for a poll, or after DEFER_MS.
        deferred = later;
        const mark = this.events.appendMark();
        await this.idle(signal, (wake) => this.events.waitForAppend(250, wake, mark));
        woken = this.events.appendMark() !== mark;
        continue;
      }
      woken = false;
      deferred = null;
      let more = false;
      try {
        ({ more } = await this.batch(projector, BATCH, undefined, true));
        backoff = 0;
        if (this.failing.delete(projector.name)) {
          this.logger.info({ projector: projector.name }, 'projection batches succeed again');
        }
      } catch (err) {
        if (signal.aborted || err instanceof ProjectionHaltedError) continue;
        const reason = describe(err);
        if (this.failing.get(projector.name) !== reason) {
          this.failing.set(projector.name, reason);
          this.logger.warn(
            { projector: projector.name, reason },
            'projection batch failed; retrying',
          );
        }
        backoff = Math.min(MAX_BACKOFF_MS, backoff === 0 ? 1000 : backoff * 2);
        await this.pause(backoff, signal);
        continue;
      }
      if (!more) {
        const mark = this.events.appendMark();
        const known = () => this.known.get(projector.name);
        await this.idle(signal, (wake) => this.headWatch.wait(known, wake, mark));
        woken = this.events.appendMark() !== mark;
      }
    }
  }

  /**
   * Whether `projector`'s loop may leave its checkpoint where it is for now
   * (what it then leaves, or null): the events after it are appends this
   * process committed and holds (each confirmed as the log's next, as
   * readAppended does), none of a type the projector handles, fewer than
   * DEFER_EVENTS, and it has not waited DEFER_MS yet. Each append is looked
   * at once: the walk goes on from where the last one stopped. Its read
   * model shows those events already (it adds no row for them); a writer
   * waiting for every read model catches it up itself (waitForPosition),
   * and /readyz counts it caught up (caughtUp).
   */
  private async deferrable(
    projector: Projector,
    before: Deferred | null,
  ): Promise<Deferred | null> {
    const since = before?.since ?? Date.now();
    if (Date.now() - since >= DEFER_MS) return null;
    // A writer's batch may have moved the checkpoint past what was left.
    const known = this.known.get(projector.name);
    const fresh =
      before === null || (known !== undefined && comparePositions(known, before.through) > 0);
    let through = fresh ? known : before.through;
    let events = fresh ? 0 : before.events;
    const seen = events;
    while (through !== undefined) {
      const next = await this.events.readAppended(through, DEFER_EVENTS, projector.handles);
      if (next === null || next.length === 0) break;
      if (next.some((e) => projector.handles.includes(e.type))) return null;
      events += next.length;
      if (events >= DEFER_EVENTS) return null;
      through = next[next.length - 1].position;
    }
    return through !== undefined && events > seen ? { since, through, events } : null;
  }

  /** Waits for `wait` (a wake-up hint or its timeout), a kick or the stop, whichever comes first. */
  private idle(signal: AbortSignal, wait: (wake: AbortSignal) => Promise<void>): Promise<void> {
    const local = new AbortController();
    const kick = () => local.abort();
    this.kicks.add(kick);
    const onAbort = () => local.abort();
    // Stopped while the loop's last batch ran: no abort event comes any more.
    if (signal.aborted) local.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    return wait(local.signal).finally(() => {
      this.kicks.delete(kick);
      signal.removeEventListener('abort', onAbort);
    });
  }

  /** Sleeps `ms`; a kick or the stop ends it early. New events do not. */
  private pause(ms: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.kicks.delete(done);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.kicks.add(done);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  /** A halted projector tries its event once more; it stays quiet unless something changed. */
  private async recheck(projector: Projector): Promise<void> {
    const before = this.halts.get(projector.name);
    if (!before) return;
    try {
      await this.attempt(projector, 1);
    } catch (err) {
      // Still failing (or the database is away): stay halted, and quiet
      // unless it is now another event.
      if (!this.cutShort(err)) await this.halt(projector, err).catch(() => undefined);
      return;
    }
    this.halts.delete(projector.name);
    this.logger.info(
      { projector: projector.name, position: before.position },
      'projection resumed past the event it had halted at',
    );
  }

  /**
   * Applies at most one batch; returns how many events it consumed. Throws
   * ProjectionHaltedError when the projector is (or now becomes) halted.
   * `bulk`, when given, counts the events the batch handled instead of
   * refreshing statistics after a big batch: the caller does that once, when
   * a catch-up is over (see waitForPosition). `loop`: the projector's own
   * loop asks, which leaves the batch to a writer of this process catching
   * the projector up.
   */
  async runBatch(projector: Projector, limit = BATCH, bulk?: Bulk, loop = false): Promise<number> {
    return (await this.batch(projector, limit, bulk, loop)).consumed;
  }

  /** runBatch, also saying whether the log may hold more right after the batch (Batch.more). */
  private async batch(
    projector: Projector,
    limit: number,
    bulk?: Bulk,
    loop = false,
  ): Promise<Batch> {
    const halt = this.halts.get(projector.name);
    if (halt) throw new ProjectionHaltedError(halt);
    try {
      return await this.attempt(projector, limit, bulk, loop);
    } catch (err) {
      if (this.cutShort(err)) throw err;
      // Applied in smaller batches: whatever is left, the next look finds.
      return { consumed: await this.isolate(projector, limit), more: true };
    }
  }

  private async attempt(
    projector: Projector,
    limit: number,
    bulk?: Bulk,
    loop = false,
  ): Promise<Batch> {
    // The lock and the read of the checkpoint go with the BEGIN: two round
    // trips less per batch.
    const standAside = () => loop && this.catchingUp.has(projector.name);
    // The next events are most likely those after the checkpoint this
    // process saw last: asked for while the BEGIN is on its way (their
    // confirmation is a round trip of its own), used only if the checkpoint
    // is still there once locked.
    const guess = standAside() ? undefined : this.known.get(projector.name);
    const heldLimit = bulk ? Math.max(limit, HELD_CATCH_UP_BATCH) : limit;
    const early =
      guess === undefined
        ? undefined
        : {
            from: guess,
            events: this.events
              .readAppended(guess, heldLimit, projector.handles)
              .catch((): null => null),
          };
    const { consumed, handled, at, more } = await this.transaction<
      Batch & { handled: number; at?: LogPosition }
    >(
      (tx, [, checkpoint]) =>
        // The loop is woken by the append itself, and may take the lock
        // before the writer that appended starts waiting: once it holds the
        // lock, it looks again.
        standAside()
          ? Promise.resolve({ consumed: 0, handled: 0, more: false })
          : this.batchIn(
              tx,
              projector,
              limit,
              checkpointOf(checkpoint.rows, projector.name),
              early,
              heldLimit,
              bulk,
            ),
      `${lockStatement(projector.name)}; ${checkpointQuery(escapeLiteral(projector.name))}`,
    );
    if (at !== undefined) this.known.set(projector.name, at);
    if (bulk) bulk.handled += handled;
    else if (handled >= ANALYZE_AFTER) this.analyzeSoon(projector);
    return { consumed, more };
  }

  /**
   * A batch failed, maybe because of one of its events: apply it in halving
   * batches (each its own transaction, so what applies is kept) until a
   * single event fails, and halt there. A failure that does not come back
   * was passing.
   */
  private isolate(projector: Projector, limit: number): Promise<number> {
    return narrowDown(
      async (size) => (await this.attempt(projector, size)).consumed,
      limit,
      (err) => this.halt(projector, err),
    );
  }

  /** Records that `projector` cannot apply the event after its checkpoint. */
  private async halt(projector: Projector, err: unknown): Promise<unknown> {
    const rows = await this.db.query<{ tx: string; gp: string }>(
      `SELECT transaction_id::text AS tx, global_position AS gp FROM kl_checkpoints
        WHERE projection = $1`,
      [projector.name],
    );
    const from = rows.length
      ? { transactionId: BigInt(rows[0].tx), globalPosition: BigInt(rows[0].gp) }
      : { transactionId: 0n, globalPosition: 0n };
    const [event] = await this.events.readAll(from, 1);
    if (!event) return err; // nothing left to apply: the failure was not an event's
    // Skipped since the attempt failed (a recheck racing `skip`): the next
    // attempt passes over it. Nothing awaits between this look and the halt
    // below, and `skip` records the skip before it lifts a halt.
    const skipped = await this.db.query(
      'SELECT 1 FROM kl_projection_skips WHERE projection = $1 AND global_position = $2',
      [projector.name, event.position.globalPosition.toString()],
    );
    if (skipped.length > 0) return err;
    const halt = haltAt(projector, event, err);
    const previous = this.halts.get(projector.name);
    this.halts.set(projector.name, previous?.position === halt.position ? previous : halt);
    if (previous?.position !== halt.position) {
      const { since: _since, ...fields } = halt;
      this.logger.error(
        fields,
        `projection halted: projector ${halt.projector} cannot apply event ${halt.position}; ` +
          'other projectors continue, writes answer 503 until it resumes (docs/operations.md)',
      );
    }
    return new ProjectionHaltedError(this.halts.get(projector.name)!);
  }

  /**
   * Records that `projector` passes over the event at `position` from now on
   * (and in every rebuild): for an event it can never apply. Wakes halted
   * projectors so they move on at once.
   */
  async skip(
    projectorName: string,
    position: bigint,
    reason: string,
  ): Promise<{ projector: string; position: number; stream: string; type: string }> {
    if (!this.projectors.some((p) => p.name === projectorName)) {
      throw new DomainError(
        'REQUEST.INVALID',
        `no projector named ${projectorName} (one of ${this.projectors.map((p) => p.name).join(', ')})`,
      );
    }
    const event = await this.events.readAt(position);
    if (event === null) {
      throw new DomainError('REQUEST.NOT_FOUND', `no event at position ${position}`);
    }
    await this.db.query(
      `INSERT INTO kl_projection_skips (projection, global_position, reason)
       VALUES ($1, $2, $3) ON CONFLICT (projection, global_position) DO NOTHING`,
      [projectorName, position.toString(), reason],
    );
    this.logger.warn(
      { projector: projectorName, position: Number(position), reason },
      'projection will skip an event',
    );
    await this.notifyMaintenance();
    // Halted at that very event: go on now rather than at the next recheck.
    if (this.halts.get(projectorName)?.position === Number(position)) {
      this.halts.delete(projectorName);
    }
    this.kick();
    return {
      projector: projectorName,
      position: Number(position),
      stream: event.streamId,
      type: event.type,
    };
  }

  /**
   * A bulk commit (an import, a first apply) can grow a read model from
   * nothing to tens of thousands of rows long before autovacuum looks at it;
   * until then the planner believes the tables are empty and can pick plans
   * that turn a 100 ms query into minutes. So statistics (and the visibility
   * map, which index-only scans need) are refreshed right after such a batch,
   * off the request path.
   */
  private analyzeSoon(projector: Projector): void {
    if (projector.tables.length === 0 || this.abort.signal.aborted) return;
    // One at a time per projector; batches landing meanwhile get one more pass.
    if (this.analyzing.has(projector.name)) {
      this.analyzeAgain.add(projector.name);
      return;
    }
    this.analyzing.add(projector.name);
    const tables = [...projector.tables, ...(projector.analyzeWith ?? [])];
    void this.track(this.refreshStatistics(tables.join(', ')))
      .catch((err: unknown) => {
        // Cut short by the stop: the next big batch (or autovacuum) takes them.
        if (!this.abort.signal.aborted) {
          this.logger.warn({ err, projector: projector.name }, 'VACUUM (ANALYZE) failed');
        }
      })
      .finally(() => {
        this.analyzing.delete(projector.name);
        if (this.analyzeAgain.delete(projector.name)) this.analyzeSoon(projector);
      });
  }

  /**
   * VACUUM, then ANALYZE from BULK_STATISTICS_TARGET's sample, on a session
   * of their own: outside a transaction block, so each table is analyzed in
   * a short transaction of its own and none holds back the log's horizon
   * (readers see an event once every older transaction has ended).
   */
  private async refreshStatistics(tables: string): Promise<void> {
    await this.stoppable(
      `VACUUM ${tables}`,
      `SET default_statistics_target = ${BULK_STATISTICS_TARGET}`,
      `ANALYZE ${tables}`,
      'RESET default_statistics_target',
    );
  }

  /**
   * `statements` (without parameters), one after the other, outside a
   * transaction block, on a connection the stop cancels; one that failed,
   * its settings perhaps not reset, is not given back to the pool.
   */
  private async stoppable(...statements: string[]): Promise<void> {
    const client = await this.db.pool.connect();
    let failed: Error | undefined;
    try {
      const session = this.sessions.enter(client);
      for (const sql of statements) await session.query(sql);
    } catch (err) {
      failed = err as Error;
      throw err;
    } finally {
      await this.sessions.leave(client);
      client.release(failed);
    }
  }

  /**
   * One batch in `tx`: the projector's rows and its checkpoint commit
   * together or not at all. The events come through the event-store port,
   * on a connection of their own, outside `tx`; that is still exact: the
   * port never returns an event a late commit could put behind one it
   * returned, so the batch is the log's next events whichever snapshot read
   * them, and the checkpoint moves only from the position read under the
   * lock to the batch's last event (compare-and-set), so a batch that another
   * process applied meanwhile is never applied twice. When those next events
   * are an append this process just committed, the port hands them over from
   * memory (`readAppended`) instead of reading them back: the same events,
   * decided on the same horizon.
   */
  private async batchIn(
    tx: PoolClient,
    projector: Projector,
    limit: number,
    /**
     * The advisory lock to take first, or, when `tx` holds it already, the
     * checkpoint it read under it.
     */
    lock: string | Checkpoint = projector.name,
    /** readAppended asked ahead, from where the checkpoint was thought to be. */
    early?: { from: LogPosition; events: Promise<RecordedEvent[] | null> },
    /** How many events to take when they are held in memory (HELD_CATCH_UP_BATCH). */
    heldLimit = limit,
    bulk?: Bulk,
  ): Promise<Batch & { handled: number; at: LogPosition }> {
    if (typeof lock === 'string') await tx.query(lockStatement(lock));
    const { position: from, skips } =
      typeof lock === 'string' ? await readCheckpoint(tx, projector.name) : lock;
    const fromMemory =
      early !== undefined && comparePositions(early.from, from) === 0
        ? await early.events
        : await this.events.readAppended(from, heldLimit, projector.handles);
    let events = fromMemory ?? (await this.events.readAll(from, limit, projector.handles));
    if (events.length === 0) return { consumed: 0, handled: 0, at: from, more: false };
    // A read of the log is cut by its limit; held events also end where
    // this process's appends do.
    let more = events.length >= (fromMemory ? heldLimit : limit);
    if (fromMemory) ({ events, more } = await this.passingOver(projector, events, more));
    const handled = events.filter(
      (e) => projector.handles.includes(e.type) && !skips.has(e.position.globalPosition),
    );
    const applying = handled.length ? projector.apply(handled, tx) : undefined;
    // Its first statement is on its way: the next projector's turn.
    bulk?.applying?.();
    await applying;
    const to = events[events.length - 1].position;
    if (!(await moveCheckpoint(tx, projector.name, from, to))) {
      throw new Error(`checkpoint of ${projector.name} moved under us`);
    }
    return { consumed: events.length, handled: handled.length, at: to, more };
  }

  /**
   * A batch from memory that holds no event of the projector's types goes
   * on over the held events after it, up to the next one of its types: a
   * first commit of 20,000 instances is 20,000 events that the projectors of
   * other read models only pass over, and in batches of BATCH each of them
   * took 40 transactions (lock, checkpoint, notification, commit) to do it.
   * Nothing is applied over the events added, so the batch's work stays
   * what its first `limit` events ask. Says whether more may follow at once
   * (`cut`, whether the batch's read was cut by its limit, when nothing is
   * added): a pass that ended with the held events
   * did not stop for a limit, and the loop then waits for the next append
   * (or the log's head past it) instead of reading the log at once to find
   * nothing there, beside the commit's answer and what its caller sends
   * next (docs/performance-history.md, wave 25).
   */
  private async passingOver(
    projector: Projector,
    events: RecordedEvent[],
    cut: boolean,
  ): Promise<{ events: RecordedEvent[]; more: boolean }> {
    if (events.some((e) => projector.handles.includes(e.type))) return { events, more: cut };
    let passed = events;
    while (passed.length < PASS_OVER) {
      // Without a type filter: the held events themselves, where the filter
      // copies every event not of the projector's types without its data
      // (20,000 copies per loop after a first commit, on kld's main thread
      // while the writer prepares its rows). Those added here are only
      // passed over: none reaches the projector.
      const next = await this.events.readAppended(
        passed[passed.length - 1].position,
        PASS_OVER - passed.length,
      );
      if (next === null || next.length === 0) return { events: passed, more: false };
      const stop = next.findIndex((e) => projector.handles.includes(e.type));
      if (stop >= 0) return { events: passed.concat(next.slice(0, stop)), more: true };
      passed = passed.concat(next);
    }
    return { events: passed, more: true };
  }

  /** Keeps `append` among the bulks until its writer's catch-up is over. */
  private trackInFlight(append: AppendInFlight): void {
    let end = (): void => undefined;
    const bulk: BulkAppend = {
      types: new Set(append.events.map((e) => e.type)),
      written: Promise.resolve(),
      ended: new Promise<void>((resolve) => (end = resolve)),
      end: () => {
        this.bulks.delete(bulk);
        end();
      },
    };
    this.bulks.add(bulk);
    bulk.written = append.committed.then(
      (recorded) => {
        if (recorded === null || recorded.length === 0) return bulk.end();
        bulk.at = recorded[recorded.length - 1].position;
        // A writer that never catches up (it failed after its append)
        // holds no loop back for longer.
        setTimeout(() => {
          if (!bulk.claimed) bulk.end();
        }, this.writerStartMs).unref();
      },
      () => bulk.end(),
    );
  }

  /** The bulk appends of this process being written (their outcome not known yet). */
  private inFlight(): BulkAppend[] {
    return [...this.bulks].filter((b) => b.at === undefined);
  }

  /**
   * The committed bulk appends whose writers are still catching up, when
   * none of them holds an event of `projector`'s types (a writer's catch-up
   * of those is the projector's own, and its loop stands aside for it
   * anyway); else none.
   */
  private writersOf(projector: Projector): BulkAppend[] {
    const committed = [...this.bulks].filter((b) => b.at !== undefined);
    const feeds = committed.some((b) => projector.handles.some((t) => b.types.has(t)));
    return feeds ? [] : committed;
  }

  /** A catch-up to `position` starts: the bulk appends up to it are waited for until it ends. */
  private writerStarts(position: LogPosition): void {
    for (const b of this.bulks) {
      if (b.at !== undefined && comparePositions(b.at, position) <= 0) b.claimed = true;
    }
  }

  /** A catch-up to `position` is over: the bulk appends up to it are no longer waited for. */
  private writerDone(position: LogPosition): void {
    for (const b of [...this.bulks]) {
      if (b.at !== undefined && comparePositions(b.at, position) <= 0) b.end();
    }
  }

  /**
   * An append is being written (EventStore.watchAppends): each projector
   * that wants its events before they commit (applyBeforeCommit) starts an
   * early transaction for them, if a connection is free now (never waiting
   * for one: the append holds one, and concurrent commands' catch-ups may
   * hold the rest) and it is not halted or at it already. Its loop stands
   * aside meanwhile, as for a writer's catch-up, which awaits the early
   * transaction before it looks at that projector.
   */
  private startEarly(append: AppendInFlight): void {
    if (this.abort.signal.aborted) return;
    for (const p of this.projectors) {
      if (!p.applyBeforeCommit || this.early.has(p.name) || this.halts.has(p.name)) continue;
      const handled = append.events.filter((e) => p.handles.includes(e.type));
      if (!p.applyBeforeCommit(handled) || !hasFreeConnection(this.db.pool)) continue;
      this.catchingUp.set(p.name, (this.catchingUp.get(p.name) ?? 0) + 1);
      const early = { done: Promise.resolve<number | null>(null), claimed: false };
      early.done = this.applyEarly(p, append, handled)
        .catch((err: unknown) => {
          // The catch-up applies the events as ever (and halts where it must).
          this.logger.debug(
            { projector: p.name, reason: describe(err) },
            'early projection rolled back',
          );
          return null;
        })
        .finally(() => {
          this.early.delete(p.name);
          const left = this.catchingUp.get(p.name)! - 1;
          if (left > 0) this.catchingUp.set(p.name, left);
          else this.catchingUp.delete(p.name);
        });
      // Committed with no catch-up waiting for it: statistics now.
      void early.done.then((n) => {
        if (!early.claimed && (n ?? 0) >= ANALYZE_AFTER) this.analyzeSoon(p);
      });
      this.early.set(p.name, early);
    }
  }

  /**
   * `projector`'s batch of `append`'s events (`handled`, of its types)
   * while the append is written: its lock (only if free: never a wait
   * while the append, or a writer behind it, waits), its rows, then the
   * append's outcome. The checkpoint moves, compare-and-set, and the
   * transaction commits only if the append committed, its events are the
   * log's next for this projector (AppendInFlight.nextAfter: no transaction
   * can still put an event before them, and none of its types lies
   * between the checkpoint and them) and none of them is to be skipped;
   * anything else rolls back, and the writer's catch-up applies the events
   * as ever. Bounded: EARLY_COMMIT_MS for the append, EARLY_SETTLE_MS for
   * the horizon. Returns the events handled, or null when nothing was kept.
   */
  private async applyEarly(
    projector: Projector,
    append: AppendInFlight,
    handled: RecordedEvent[],
  ): Promise<number | null> {
    const pooled = await this.db.pool.connect();
    let client: PoolClient;
    try {
      client = this.sessions.enter(pooled);
    } catch (err) {
      pooled.release();
      throw err;
    }
    let committed = false;
    let broken = false;
    let over = false;
    void append.committed.then(() => (over = true));
    try {
      const name = escapeLiteral(projector.name);
      const lockAndCheckpoint = `SELECT pg_try_advisory_xact_lock(${LOCK_NAMESPACE},
         hashtext(${name})) AS locked; ${checkpointQuery(name)}`;
      let [, lock, checkpoint] = (await client.query(
        `BEGIN; ${lockAndCheckpoint}`,
      )) as unknown as QueryResult[];
      // Held by a batch of the projector's loop, most likely (an idle one
      // looks every 250 ms): tried again for a moment, without waiting on
      // it, while the append is still being written.
      for (let tries = 1; lock.rows[0].locked !== true; tries++) {
        if (tries >= EARLY_LOCK_TRIES || over || this.abort.signal.aborted) return null;
        await new Promise((r) => setTimeout(r, EARLY_POLL_MS));
        [lock, checkpoint] = (await client.query(lockAndCheckpoint)) as unknown as QueryResult[];
      }
      const { position: from } = checkpointOf(checkpoint.rows as CheckpointRow[], projector.name);
      await projector.apply(handled, client);
      const recorded = await this.outcome(append.committed);
      if (recorded === null) return null;
      const head = recorded[0].position;
      const to = recorded[recorded.length - 1].position;
      // The checkpoint's move and the question that decides whether it is
      // kept (COMMIT) or not (ROLLBACK) go out back to back: node-postgres
      // sends the second as soon as the first is answered, not once this
      // code has had its turn of a busy event loop. Only a commit announces
      // the move.
      const moved = moveCheckpoint(client, projector.name, from, to, head);
      moved.catch(() => undefined); // awaited below, unless the question failed first
      const settleBy = Date.now() + EARLY_SETTLE_MS;
      for (;;) {
        const next = await append.nextAfter(from, recorded, projector.handles, client);
        if (next === 'next') break;
        if (next === 'not next' || Date.now() > settleBy || this.abort.signal.aborted) return null;
        await new Promise((r) => setTimeout(r, EARLY_POLL_MS));
      }
      if (!(await moved)) return null;
      await client.query('COMMIT');
      committed = true;
      this.known.set(projector.name, to);
      return handled.length;
    } finally {
      await this.sessions.leave(pooled);
      if (!committed) await pooled.query('ROLLBACK').catch(() => (broken = true));
      pooled.release(broken);
    }
  }

  /** The append's recorded events, or null when it did not commit within EARLY_COMMIT_MS (or the runner stops). */
  private outcome(
    committed: Promise<readonly RecordedEvent[] | null>,
  ): Promise<readonly RecordedEvent[] | null> {
    let timer: NodeJS.Timeout | undefined;
    let onAbort = (): void => undefined;
    const given = new Promise<null>((resolve) => {
      timer = setTimeout(() => resolve(null), EARLY_COMMIT_MS);
      onAbort = () => resolve(null);
      this.abort.signal.addEventListener('abort', onAbort, { once: true });
    });
    return Promise.race([committed, given]).finally(() => {
      clearTimeout(timer);
      this.abort.signal.removeEventListener('abort', onAbort);
    });
  }

  /** Positions of every projector (the slowest decides read-your-writes). */
  async checkpoints(): Promise<Map<string, LogPosition>> {
    const rows = await this.db.query<{ projection: string; tx: string; gp: string }>(
      `SELECT projection, transaction_id::text AS tx, global_position AS gp FROM kl_checkpoints
        WHERE projection = ANY($1)`,
      [this.projectors.map((p) => p.name)],
    );
    const map = new Map<string, LogPosition>();
    for (const r of rows) {
      map.set(r.projection, { transactionId: BigInt(r.tx), globalPosition: BigInt(r.gp) });
    }
    return map;
  }

  async reached(position: LogPosition): Promise<boolean> {
    return (await this.short(position, this.projectors)) === null;
  }

  /**
   * Resolves once every read model includes the event at `position`; the
   * write path awaits this before answering (read-your-writes on any replica).
   * With `types`, the types of the events a command appended up to
   * `position`, only the projectors that handle one of them have to get
   * there: the others add no row for those events, so their read models
   * show the write however far behind they are, and are left to their
   * loops. A lock or an unlock then waits for two projectors, not all ten.
   * A halted projector short of `position` still refuses the wait, needed
   * or not: writes answer SERVER.LAGGING until it resumes.
   */
  async waitForPosition(
    position: LogPosition,
    types?: readonly string[],
    timeoutMs = 30_000,
  ): Promise<void> {
    const needed =
      types === undefined
        ? this.projectors
        : this.projectors.filter((p) => p.handles.some((t) => types.includes(t)));
    // Marked before the first look, so that a loop woken by the same append
    // leaves these events to this writer's big batches.
    for (const p of needed) {
      this.catchingUp.set(p.name, (this.catchingUp.get(p.name) ?? 0) + 1);
    }
    this.writerStarts(position);
    try {
      await this.track(this.catchUp(position, needed, types !== undefined, timeoutMs));
    } finally {
      this.writerDone(position);
      for (const p of needed) {
        const left = this.catchingUp.get(p.name)! - 1;
        if (left > 0) this.catchingUp.set(p.name, left);
        else this.catchingUp.delete(p.name);
      }
    }
  }

  private async catchUp(
    position: LogPosition,
    needed: readonly Projector[],
    ownEvents: boolean,
    timeoutMs: number,
  ): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    // A command's own events were appended just now: the projectors they
    // feed are behind, so the first look at the checkpoints is skipped.
    let known: { behind: Projector[]; halted: ProjectionHalt[] } | null =
      ownEvents && needed.length > 0 ? { behind: [...needed], halted: [] } : null;
    for (;;) {
      // Stopping: the events are stored, and the next start projects them.
      if (this.abort.signal.aborted) throw new SessionsStoppedError();
      const first = known ?? (await this.short(position, needed));
      known = null;
      if (first === null) return;
      if (first.behind.length === 0) throw new ProjectionHaltedError(first.halted[0]);
      if (Date.now() > deadline) throw new ProjectionTimeoutError(position, timeoutMs);
      // Do the work here rather than wait for a loop: the caller is blocked on
      // it. Projectors are independent (own tables, own checkpoint, own lock),
      // so they catch up side by side, each on its own connection; a halted
      // one is left alone (the others still show the write).
      // Statistics are refreshed once the whole catch-up is over: a VACUUM
      // (ANALYZE) after its first big batch would scan the tables while the
      // rest of the commit is still being written (competing for the CPU),
      // and once more for the batches that landed meanwhile.
      const bulk = new Map<Projector, Bulk>();
      // A few of the command's own events, held in memory, for several read
      // models: one transaction for them all (a BEGIN and a COMMIT, not one
      // each). Many (a first commit) keep a connection per read model: their
      // COPY runs need one each, and PostgreSQL writes them side by side.
      const together =
        ownEvents &&
        first.behind.length > 1 &&
        first.behind.every((p) => !this.halts.has(p.name) && this.near(p, position))
          ? await this.together(first.behind)
          : null;
      if (together !== null) {
        for (const [p, handled] of together) if (handled >= ANALYZE_AFTER) this.analyzeSoon(p);
        if (this.halts.size === 0 && needed.every((p) => this.knownAt(p, position))) {
          this.releaseKnown();
          return;
        }
        continue;
      }
      // They start in their order, each once the one before it has sent its
      // first statement (Bulk.applying): preparing a projector's rows holds
      // the event loop for tens of milliseconds, and a first commit's longest
      // statement in PostgreSQL, the lifecycles' COPY (their projector is
      // listed first), waited behind the edges' and the raw state's
      // preparation (docs/performance-history.md, wave 13). A projector waits for its
      // turn before it asks for a connection or its lock: waiting while
      // holding them, concurrent commands' catch-ups could take every
      // connection of the pool while the projectors they wait for had none.
      let turn: Promise<void> = Promise.resolve();
      try {
        await Promise.all(
          first.behind
            .filter((p) => !this.halts.has(p.name))
            .map(async (p) => {
              let pass = (): void => undefined;
              const mine = turn;
              const counted: Bulk = { handled: 0, applying: () => pass() };
              turn = new Promise<void>((resolve) => (pass = resolve));
              bulk.set(p, counted);
              try {
                const early = this.early.get(p.name);
                if (early !== undefined) {
                  // Its rows are being written beside the append already
                  // (applyEarly): the next projector's turn.
                  early.claimed = true;
                  pass();
                  counted.handled += (await early.done) ?? 0;
                } else await mine;
                // A batch from memory ends where the held appends do (before an
                // append of another process): go on while there is progress
                // and this projector is short of the position.
                while (!this.knownAt(p, position)) {
                  const n = await this.runBatch(p, CATCH_UP_BATCH, counted);
                  if (n === 0) break;
                }
              } finally {
                pass();
              }
            }),
        );
      } finally {
        for (const [p, { handled }] of bulk) if (handled >= ANALYZE_AFTER) this.analyzeSoon(p);
      }
      // The batches just committed say where each projector is: with no
      // projector halted here, reading the checkpoints back tells nothing new.
      if (this.halts.size === 0 && needed.every((p) => this.knownAt(p, position))) {
        this.releaseKnown();
        return;
      }
      const after = await this.short(position, needed);
      if (after === null) return;
      // Once only halted projectors are missing (halted at or before
      // `position`), waiting will not get them there.
      if (after.behind.every((p) => after.halted.some((h) => h.projector === p.name))) {
        throw new ProjectionHaltedError(after.halted[0]);
      }
      await this.notifier.wait(CHECKPOINTS_CHANNEL, 20);
    }
  }

  /**
   * One batch for several projectors in one transaction: their locks (in
   * the order of their names, as every such batch takes them) and
   * checkpoints with the `BEGIN`, each one's events from the appends this
   * process holds, applied side by side on the one connection (their
   * statements sent one after the other, inTurn, while kld prepares the next
   * projector's), and every checkpoint moved in one statement: one commit
   * where each projector's own batch makes one, and three statements less
   * for each projector past the first. Only for events held in memory: when
   * one projector's next events are not (another process appended
   * between), nothing is written. Anything failing rolls the whole back (no
   * projector's rows are kept), and the caller goes on projector by
   * projector, where a failing one is isolated and halted as ever: it
   * neither holds up nor spoils the others. Returns how many events each
   * projector handled, or null when nothing was committed.
   */
  private async together(projectors: readonly Projector[]): Promise<Map<Projector, number> | null> {
    const sorted = [...projectors].sort((a, b) => (a.name < b.name ? -1 : 1));
    const names = `ARRAY[${sorted.map((p) => escapeLiteral(p.name)).join(', ')}]::text[]`;
    // Every lock in one statement, then every checkpoint in one (read under
    // the locks: a statement of its own, with its own snapshot), then the
    // settings (togetherSettings).
    const opening =
      `SELECT pg_advisory_xact_lock(${LOCK_NAMESPACE}, hashtext(n)) FROM unnest(${names}) AS n; ` +
      `${checkpointsQuery(names)}${this.togetherSettings}`;
    // The held appends after the checkpoints this process last committed,
    // asked while the BEGIN block runs: their confirmation (a statement on
    // another connection) then costs no round trip of its own on the
    // command's path. A confirmed answer stays true (nothing can commit
    // before a committed event later), so it serves when the checkpoint read
    // under the locks is the one known; otherwise, or when it found nothing,
    // the read is asked again from the checkpoint read.
    const early = sorted.map((p) => {
      const at = this.known.get(p.name);
      if (at === undefined) return null;
      const answer = this.events.readAppended(at, TOGETHER_UP_TO, p.handles);
      answer.catch(() => undefined);
      return { at, answer };
    });
    try {
      const done = await this.transaction(async (tx, opened) => {
        const read = opened[1].rows as (CheckpointRow & { name: string })[];
        const from = sorted.map((p) =>
          checkpointOf(
            read.filter((r) => r.name === p.name),
            p.name,
          ),
        );
        const batches = await Promise.all(
          sorted.map(async (p, i) => {
            const asked = early[i];
            const known =
              asked !== null && comparePositions(asked.at, from[i].position) === 0
                ? await asked.answer.catch(() => null)
                : null;
            return known ?? this.events.readAppended(from[i].position, TOGETHER_UP_TO, p.handles);
          }),
        );
        if (batches.some((b) => b === null)) return null;
        const applied = new Map<Projector, { handled: number; at: LogPosition }>();
        const applying: Promise<void>[] = [];
        const shared = inTurn(tx);
        for (const [i, p] of sorted.entries()) {
          const events = batches[i]!;
          if (events.length === 0) continue;
          const handled = events.filter(
            (e) => p.handles.includes(e.type) && !from[i].skips.has(e.position.globalPosition),
          );
          if (handled.length) applying.push(p.apply(handled, shared));
          applied.set(p, { handled: handled.length, at: events[events.length - 1].position });
        }
        // Every apply has ended before the COMMIT or ROLLBACK is sent: none
        // may send a statement after the transaction is over.
        const failed = (await Promise.allSettled(applying)).find((r) => r.status === 'rejected');
        if (failed !== undefined) throw (failed as PromiseRejectedResult).reason;
        if (applied.size > 0) await moveTogether(tx, sorted, from, applied);
        return applied;
      }, opening);
      if (done === null) return null;
      for (const [p, { at }] of done) this.known.set(p.name, at);
      return new Map([...done].map(([p, { handled }]) => [p, handled]));
    } catch {
      return null;
    }
  }

  /**
   * Null when every projector of `needed` is at `position` or past it and no
   * halted projector is short of it; else the projectors of `needed` short
   * of it and the halts (at or before `position`) of every projector short
   * of it. One read of the checkpoints, none when the caller has them.
   */
  private async short(
    position: LogPosition,
    needed: readonly Projector[],
    cps?: Map<string, LogPosition>,
  ): Promise<{ behind: Projector[]; halted: ProjectionHalt[] } | null> {
    cps ??= await this.checkpoints();
    this.releaseAppends(cps);
    const isShort = (p: Projector) => {
      const cp = cps.get(p.name);
      return cp === undefined || comparePositions(cp, position) < 0;
    };
    const behind = needed.filter(isShort);
    const halted = this.projectors.flatMap((p) => {
      const halt = this.halts.get(p.name);
      return halt && isShort(p) && comparePositions(haltPosition(halt), position) <= 0
        ? [halt]
        : [];
    });
    return behind.length === 0 && halted.length === 0 ? null : { behind, halted };
  }

  /**
   * Whether a batch of this process committed `projector`'s checkpoint at
   * most TOGETHER_UP_TO positions short of `position` (a few events to go).
   */
  private near(projector: Projector, position: LogPosition): boolean {
    const at = this.known.get(projector.name);
    return (
      at !== undefined && position.globalPosition - at.globalPosition <= BigInt(TOGETHER_UP_TO)
    );
  }

  /** Whether a batch of this process committed `projector`'s checkpoint at `position` or past it. */
  private knownAt(projector: Projector, position: LogPosition): boolean {
    const at = this.known.get(projector.name);
    return at !== undefined && comparePositions(at, position) >= 0;
  }

  /** releaseAppends from the checkpoints this process saw committed (never ahead of the real ones). */
  private releaseKnown(): void {
    this.releaseAppends(this.known);
  }

  /** Every projector is past the appends up to the slowest: the event store may let them go. */
  private releaseAppends(cps: Map<string, LogPosition>): void {
    let slowest: LogPosition | undefined;
    for (const p of this.projectors) {
      const cp = cps.get(p.name);
      if (cp === undefined) return;
      if (slowest === undefined || comparePositions(cp, slowest) < 0) slowest = cp;
    }
    if (slowest !== undefined) this.events.releaseAppends(slowest);
  }

  /**
   * True when no projector has committed events left to apply. A projector
   * behind only by events it does not handle shows every write already:
   * commands wait only for the projectors their events feed, and the
   * others' loops move their checkpoints past such events a moment later,
   * so under steady writes a replica would otherwise flap out of
   * readiness. A projector further behind than READY_LOOKAHEAD events is
   * catching up a backlog and not ready.
   */
  async caughtUp(): Promise<boolean> {
    const last = await this.events.lastPosition();
    if (last === null) return true;
    const cps = await this.checkpoints();
    const short = await this.short(last, this.projectors, cps);
    if (short === null) return true;
    if (short.halted.length > 0) return false;
    for (const p of short.behind) {
      const from = cps.get(p.name);
      if (from === undefined) return false;
      const next = await this.events.readAll(from, READY_LOOKAHEAD, p.handles);
      if (next.length >= READY_LOOKAHEAD) return false;
      if (next.some((e) => p.handles.includes(e.type))) return false;
    }
    return true;
  }

  /**
   * Replays the whole log into every read model without taking the service
   * down: the log is replayed into empty copies of the tables (see
   * shadow-tables.ts) while the live tables keep serving reads and the live
   * projection keeps applying new events to them. Then one short transaction
   * holding every projector's lock catches the copies up with what was
   * committed meanwhile and swaps them in with the checkpoints, so nothing
   * the live tables had is missing from the new ones. Readers wait only for
   * that swap. One rebuild at a time (RebuildRunningError otherwise).
   */
  rebuild(): Promise<{ projector: string; events: number }[]> {
    return this.track(
      this.rebuildAlone().catch((err: unknown) => {
        throw this.abort.signal.aborted ? new RebuildStoppedError(err) : err;
      }),
    );
  }

  /** rebuild, under the session lock that keeps it the only one. */
  private async rebuildAlone(): Promise<{ projector: string; events: number }[]> {
    const session = await this.db.pool.connect();
    let broken = false;
    try {
      const { rows } = await session.query<{ ok: boolean }>(
        'SELECT pg_try_advisory_lock($1, hashtext($2)) AS ok',
        [LOCK_NAMESPACE, REBUILD_LOCK],
      );
      if (!rows[0].ok) throw new RebuildRunningError();
      try {
        return await this.rebuildBeside();
      } finally {
        await dropShadowTables(this.db).catch((err: unknown) =>
          this.logger.warn({ err }, `could not drop schema ${SHADOW_SCHEMA}`),
        );
        await session
          .query('SELECT pg_advisory_unlock($1, hashtext($2))', [LOCK_NAMESPACE, REBUILD_LOCK])
          .catch(() => (broken = true)); // closing the connection releases it
      }
    } finally {
      session.release(broken);
    }
  }

  private async rebuildBeside(): Promise<{ projector: string; events: number }[]> {
    const tables = this.projectors.flatMap((p) => p.tables);
    const live = await createShadowTables(this.db, tables);
    const events = new Map(this.projectors.map((p) => [p.name, 0]));
    const replay = async (projector: Projector) => {
      const n = await this.replayBeside(projector, live);
      events.set(projector.name, events.get(projector.name)! + n);
    };
    for (const projector of this.projectors) {
      await replay(projector);
      this.logger.info({ projector: projector.name }, 'projection replayed beside the live one');
    }
    if (tables.length) await this.stoppable(`VACUUM (ANALYZE) ${shadowNames(tables)}`);
    // What was committed while the others replayed, so that the swap itself
    // (which holds up the live projection) only has the last moment to do.
    for (const projector of this.projectors) await replay(projector);
    const tail = await this.swapIn(live, tables);
    // Every projector is past whatever it had halted at (only a skipped
    // event can be passed), so the halts are over.
    this.halts.clear();
    this.kick();
    await this.notifyMaintenance();
    return this.projectors.map((p) => {
      const replayed = events.get(p.name)! + (tail.get(p.name) ?? 0);
      this.logger.info({ projector: p.name, events: replayed }, 'projection rebuilt');
      return { projector: p.name, events: replayed };
    });
  }

  private async notifyMaintenance(): Promise<void> {
    await this.db
      .query('SELECT pg_notify($1, $2)', [MAINTENANCE_CHANNEL, ''])
      .catch(() => undefined);
  }

  /** Applies the log to `projector`'s copies, one transaction per batch, until it is caught up. */
  private async replayBeside(projector: Projector, live: string): Promise<number> {
    const batch = (limit: number) =>
      this.transaction(async (tx) => {
        await useShadowTables(tx, live);
        return this.batchIn(tx, projector, limit, shadowLock(projector));
      });
    let total = 0;
    let analyzed = false;
    for (;;) {
      let consumed: number;
      let handled = 0;
      try {
        ({ consumed, handled } = await batch(CATCH_UP_BATCH));
      } catch (err) {
        if (this.cutShort(err)) throw err;
        // Name the event, which is what the operator needs to skip it.
        consumed = await narrowDown(
          async (size) => (await batch(size)).consumed,
          CATCH_UP_BATCH,
          (failure) => this.unappliableInShadow(projector, live, failure),
        );
      }
      if (consumed === 0) return total;
      total += consumed;
      // The copies start empty, like a fresh database: once they hold rows,
      // the planner must know it (see analyzeSoon).
      if (!analyzed && handled >= ANALYZE_AFTER && projector.tables.length) {
        await this.stoppable(`ANALYZE ${shadowNames(projector.tables)}`);
        analyzed = true;
      }
    }
  }

  /** The error for the event after `projector`'s shadow checkpoint, which failed with `err`. */
  private async unappliableInShadow(
    projector: Projector,
    live: string,
    err: unknown,
  ): Promise<unknown> {
    const { position } = await this.db.transaction(async (tx) => {
      await useShadowTables(tx, live);
      return readCheckpoint(tx, projector.name);
    });
    const [event] = await this.events.readAll(position, 1);
    return event ? new ProjectionHaltedError(haltAt(projector, event, err)) : err;
  }

  /** Catches the copies up and swaps them in; returns the events caught up per projector. */
  private async swapIn(live: string, tables: readonly string[]): Promise<Map<string, number>> {
    const deadline = Date.now() + SWAP_PATIENCE_MS;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.transaction(async (tx) => {
          // Live batches (and writers waiting for their events) pause here.
          for (const p of this.projectors) {
            await tx.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [
              LOCK_NAMESPACE,
              p.name,
            ]);
          }
          await useShadowTables(tx, live);
          const tail = new Map<string, number>();
          for (const p of this.projectors) {
            let total = 0;
            for (;;) {
              const n = (await this.batchIn(tx, p, CATCH_UP_BATCH, shadowLock(p))).consumed;
              if (n === 0) break;
              total += n;
            }
            tail.set(p.name, total);
          }
          await swapInShadowTables(
            tx,
            live,
            tables,
            this.projectors.map((p) => p.name),
            SWAP_LOCK_TIMEOUT_MS,
          );
          return tail;
        });
      } catch (err) {
        // lock_not_available (lock_timeout), or chosen to break a deadlock
        const busy = ['55P03', '40P01'].includes((err as { code?: string }).code ?? '');
        if (!busy || Date.now() > deadline || this.abort.signal.aborted) throw err;
        const pause = Math.min(5000, 250 * 2 ** attempt) * (0.5 + Math.random() / 2);
        this.logger.info({ attempt, pauseMs: Math.round(pause) }, 'read models busy; swap later');
        await new Promise((r) => setTimeout(r, pause));
      }
    }
  }
}

/** A bulk append of this process, until its writer's catch-up is over (trackInFlight). */
interface BulkAppend {
  /** The types of its events. */
  readonly types: ReadonlySet<string>;
  /** Its last event, once committed. */
  at?: LogPosition;
  /** Resolves once its outcome is known (committed or not). */
  written: Promise<void>;
  /** A catch-up to it has started (waitForPosition): it is waited for until that ends. */
  claimed?: boolean;
  readonly ended: Promise<void>;
  /** No longer waited for. */
  readonly end: () => void;
}

/**
 * Resolves once every one of `promises` has settled (each of a bulk's does:
 * see ProjectionRunner.bulks), after `timeoutMs` at the latest if given, or
 * when `wake` aborts.
 */
function settled(
  promises: readonly Promise<unknown>[],
  wake: AbortSignal,
  timeoutMs?: number,
): Promise<void> {
  return new Promise<void>((resolve) => {
    if (wake.aborted) return resolve();
    const timer = timeoutMs === undefined ? undefined : setTimeout(done, timeoutMs);
    wake.addEventListener('abort', done, { once: true });
    void Promise.all(promises).then(done, done);
    function done(): void {
      clearTimeout(timer);
      wake.removeEventListener('abort', done);
      resolve();
    }
  });
}

/** What a projector's loop has left for later (deferrable). */
interface Deferred {
  since: number;
  /** The last event looked at. */
  through: LogPosition;
  events: number;
}

/**
 * Whether the pool can hand out one more connection now, without waiting
 * for one to be released: more idle ones, or room for new ones, than
 * callers queued (a caller given an idle connection stays queued until the
 * next tick).
 */
function hasFreeConnection(pool: Pool): boolean {
  const room = (pool.options.max ?? 10) - pool.totalCount;
  return pool.idleCount + room > pool.waitingCount;
}

/** Takes the transaction-scoped advisory lock `name` (a statement without parameters). */
function lockStatement(name: string): string {
  return `SELECT pg_advisory_xact_lock(${LOCK_NAMESPACE}, hashtext(${escapeLiteral(name)}))`;
}

/**
 * `tx` shared by projectors applying side by side (together): each statement
 * is sent once the one before it has answered, in the order they were asked
 * for (node-postgres warns of, and will refuse, a query sent while another
 * runs). A COPY (a stream, not a statement) is refused: together's batches
 * are below every projector's threshold for one, and a refusal only sends
 * the projectors their own batches.
 */
function inTurn(tx: PoolClient): Queryable {
  let last: Promise<unknown> = Promise.resolve();
  const query = (...args: unknown[]): Promise<unknown> => {
    if (typeof (args[0] as { submit?: unknown } | null)?.submit === 'function') {
      throw new Error('no COPY in a transaction several projectors share');
    }
    const sent = last.then(() => (tx.query as (...a: unknown[]) => Promise<unknown>)(...args));
    last = sent.catch(() => undefined);
    return sent;
  };
  return { query } as unknown as Queryable;
}

/**
 * Moves the checkpoints of the projectors `applied` holds (together), each
 * compare-and-set from where `from` read it, in one statement, announced at
 * commit; throws when one was not where it was read.
 */
async function moveTogether(
  tx: PoolClient,
  projectors: readonly Projector[],
  from: readonly Checkpoint[],
  applied: ReadonlyMap<Projector, { at: LogPosition }>,
): Promise<void> {
  const moves = projectors.flatMap((p, i) => {
    const a = applied.get(p);
    return a === undefined ? [] : [{ name: p.name, to: a.at, from: from[i].position }];
  });
  const { rowCount } = await tx.query(
    prepared(
      `WITH moved AS (
         UPDATE kl_checkpoints c
            SET transaction_id = v.tx::xid8, global_position = v.gp, updated_at = now()
           FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::bigint[])
                AS v (name, tx, gp, from_tx, from_gp)
          WHERE c.projection = v.name AND c.transaction_id = v.from_tx::xid8
            AND c.global_position = v.from_gp
         RETURNING c.projection
       )
       SELECT pg_notify($6, projection) FROM moved`,
      [
        moves.map((m) => m.name),
        moves.map((m) => m.to.transactionId.toString()),
        moves.map((m) => m.to.globalPosition.toString()),
        moves.map((m) => m.from.transactionId.toString()),
        moves.map((m) => m.from.globalPosition.toString()),
        CHECKPOINTS_CHANNEL,
      ],
    ),
  );
  if (rowCount !== moves.length) throw new Error('a checkpoint moved under us');
}

/**
 * Moves a projector's checkpoint from `from` to `to`, compare-and-set, and
 * announces the move (at commit) only when it moved. With `unskippedFrom`,
 * only when no event from there to `to` is one to skip (for a batch that
 * did not look at the skips). Resolves whether it moved.
 */
async function moveCheckpoint(
  tx: PoolClient,
  name: string,
  from: LogPosition,
  to: LogPosition,
  unskippedFrom?: LogPosition,
): Promise<boolean> {
  const unskipped =
    unskippedFrom === undefined
      ? ''
      : `AND NOT EXISTS (SELECT 1 FROM kl_projection_skips
                          WHERE projection = $1 AND global_position BETWEEN $7 AND $3)`;
  const { rowCount } = await tx.query(
    prepared(
      `WITH moved AS (
         UPDATE kl_checkpoints
            SET transaction_id = $2::xid8, global_position = $3, updated_at = now()
          WHERE projection = $1 AND transaction_id = $4::xid8 AND global_position = $5
            ${unskipped}
         RETURNING projection
       )
       SELECT pg_notify($6, projection) FROM moved`,
      [
        name,
        to.transactionId.toString(),
        to.globalPosition.toString(),
        from.transactionId.toString(),
        from.globalPosition.toString(),
        CHECKPOINTS_CHANNEL,
        ...(unskippedFrom === undefined ? [] : [unskippedFrom.globalPosition.toString()]),
      ],
    ),
  );
  return rowCount === 1;
}

function shadowNames(tables: readonly string[]): string {
  return tables.map((t) => `${SHADOW_SCHEMA}.${t}`).join(', ');
}

/**
 * The projector's checkpoint and the events it skips, in one statement that
 * also creates the checkpoint row on first use: a row this statement inserts
 * comes from its RETURNING (its own snapshot cannot see it), one that was
 * there from the table.
 */
async function readCheckpoint(tx: PoolClient, name: string): Promise<Checkpoint> {
  const { rows } = await tx.query<CheckpointRow>(prepared(checkpointQuery('$1'), [name]));
  return checkpointOf(rows, name);
}

interface Checkpoint {
  position: LogPosition;
  skips: Set<bigint>;
}

interface CheckpointRow {
  tx: string;
  gp: string;
  skips: string[] | null;
}

/** readCheckpoint's statement; `name`: a parameter (`$1`) or an escaped literal. */
function checkpointQuery(name: string): string {
  return `WITH created AS (
       INSERT INTO kl_checkpoints (projection) VALUES (${name})
       ON CONFLICT (projection) DO NOTHING
       RETURNING transaction_id, global_position
     ), current AS (
       SELECT transaction_id, global_position FROM created
       UNION ALL
       SELECT transaction_id, global_position FROM kl_checkpoints WHERE projection = ${name}
     )
     SELECT transaction_id::text AS tx, global_position AS gp,
            (SELECT array_agg(global_position::text) FROM kl_projection_skips
              WHERE projection = ${name}) AS skips
       FROM current`;
}

/**
 * checkpointQuery for several projectors at once (`names`: a text[]
 * expression of escaped literals), one row each, named.
 */
function checkpointsQuery(names: string): string {
  return `WITH names (projection) AS (SELECT unnest(${names})), created AS (
       INSERT INTO kl_checkpoints (projection) SELECT projection FROM names
       ON CONFLICT (projection) DO NOTHING
       RETURNING projection, transaction_id, global_position
     ), current AS (
       SELECT projection, transaction_id, global_position FROM created
       UNION ALL
       SELECT projection, transaction_id, global_position
         FROM kl_checkpoints JOIN names USING (projection)
     )
     SELECT c.projection AS name, c.transaction_id::text AS tx, c.global_position AS gp,
            (SELECT array_agg(s.global_position::text) FROM kl_projection_skips s
              WHERE s.projection = c.projection) AS skips
       FROM current c`;
}

function checkpointOf(rows: CheckpointRow[], name: string): Checkpoint {
  // Created meanwhile by a transaction this snapshot does not see: go again.
  if (rows.length !== 1) throw new Error(`checkpoint of ${name} moved under us`);
  return {
    position: { transactionId: BigInt(rows[0].tx), globalPosition: BigInt(rows[0].gp) },
    skips: new Set((rows[0].skips ?? []).map(BigInt)),
  };
}

function haltPosition(halt: ProjectionHalt): LogPosition {
  return { transactionId: BigInt(halt.transactionId), globalPosition: BigInt(halt.position) };
}

function haltAt(projector: Projector, event: RecordedEvent, err: unknown): ProjectionHalt {
  return {
    projector: projector.name,
    position: Number(event.position.globalPosition),
    transactionId: event.position.transactionId.toString(),
    stream: event.streamId,
    type: event.type,
    reason: describe(err),
    since: new Date().toISOString(),
  };
}

// SQLSTATE classes of failures that pass: connection, transaction rollback
// (serialization, deadlock), insufficient resources, operator intervention,
// system errors; and lock_not_available.
const PASSING_SQLSTATE = /^(08|40|53|57|58)|^55P03$/;
// node-postgres and socket errors that carry no SQLSTATE.
const PASSING_MESSAGE = /connect|terminat|timeout|ECONN|EPIPE|pool|moved under us/i;

/**
 * After a batch failed for a reason that may be one of its events: applies
 * halving batches (`apply(size)` returns the events it consumed) until a
 * single event fails, then throws what `unappliable` makes of that failure.
 * Returns the events consumed when the failure did not come back.
 */
async function narrowDown(
  apply: (size: number) => Promise<number>,
  limit: number,
  unappliable: (err: unknown) => Promise<unknown>,
): Promise<number> {
  let consumed = 0;
  let size = Math.max(1, limit >> 1);
  while (consumed < limit) {
    try {
      const n = await apply(size);
      consumed += n;
      if (n < size) break; // caught up
    } catch (err) {
      if (isPassing(err)) throw err;
      if (size === 1) throw await unappliable(err);
      size >>= 1;
    }
  }
  return consumed;
}

/** Is this a failure that retrying the same batch can get past? */
function isPassing(err: unknown): boolean {
  // read models a crash emptied: refused until the rebuild has swapped them in
  if (err instanceof ReadModelsRebuildingError) return true;
  // a statement not sent because kld stops: the next start applies the batch
  if (err instanceof SessionsStoppedError) return true;
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return PASSING_SQLSTATE.test(code);
  if (typeof code === 'string' && /^E[A-Z]+$/.test(code)) return true;
  return err instanceof Error && PASSING_MESSAGE.test(err.message);
}

/** One line about an error, for logs and /readyz: its message and SQLSTATE, never a stack. */
function describe(err: unknown): string {
  const e = err as { message?: unknown; code?: unknown } | null;
  const message = typeof e?.message === 'string' ? e.message : String(err);
  const code = typeof e?.code === 'string' ? ` (${e.code})` : '';
  return `${message.split('\n')[0].slice(0, 300)}${code}`;
}
