import type { Decider } from '../domain/shared/decider';
import type { CommandContext, DomainEvent } from '../domain/shared/event';
import { DomainError } from '../domain/shared/domain-error';
import { AggregateStore, HandleProbe, StateAt } from './aggregate-store';
import { CacheBudgets, DEFAULT_CACHE_BUDGETS } from './bounded-cache';
import { Caller, commandContext } from './command-context';
import type { Clock, Ids } from './ports/clock.port';
import type { EventStore, StreamRevision } from './ports/event-store.port';
import { CommandMetrics, CommandOutcome, NO_METRICS } from './ports/metrics.port';
import { awaitReadModels, ReadModelSync, SERVER_LAGGING } from './ports/read-model-sync.port';
import type { SnapshotStore } from './ports/snapshot-store.port';

/** What the DeciderService needs to know of one aggregate. */
export interface AggregateSpec<C extends { metadata: CommandContext }, S, E extends DomainEvent> {
  /** For metrics and logs: `state`, `refresh-run`… */
  name: string;
  decider: Decider<C, S, E>;
  /** The stream a command decides on. */
  streamOf(command: C): string;
  snapshots: {
    /** Shape id; bump it when the state's shape changes. */
    schema: string;
    to(state: S): unknown;
    /** `to` as JSON text in pieces, for a big state (AggregateOptions.toSnapshotText). */
    text?(state: S): Iterable<string>;
    from(json: unknown): S;
    /** Events between snapshots (default 200). */
    every?: number;
    /** More events between snapshots for a big state (AggregateOptions.snapshotSpacing). */
    spacing?(state: S): number;
  };
  /** Which budget bounds the streams kept warm in memory (default `streams`). */
  cacheBudget?: 'streams' | 'refreshRuns';
  /** What a command did, for an answer whose read models lag (it is durable by then). */
  done(command: C, state: S): string;
}

export interface DeciderServiceProps {
  events: EventStore;
  snapshots: SnapshotStore;
  sync: ReadModelSync;
  clock: Clock;
  ids: Ids;
  /** The appended events' ids (default: `ids`); time-ordered in kld (RandomUuids). */
  eventIds?: Ids;
  /** Streams kept warm per aggregate (KL_CACHE_STREAMS, KL_CACHE_REFRESH_RUNS). */
  cache?: Pick<CacheBudgets, 'streams' | 'refreshRuns'>;
  /** Default: none. */
  metrics?: CommandMetrics;
  /** Told of a snapshot that could not be written (logged; a snapshot is only a cache). */
  snapshotFailed?(aggregate: string, streamId: string, err: unknown): void;
}

/**
 * Runs a command of any aggregate end to end: decide on its stream, append,
 * then wait until the read models include the new events, so the next
 * request (on any replica) reads what this one wrote.
 */
/** Where a command's inputs came from, besides its own stream (DeciderService.execute). */
export interface ReadFrom {
  /** The other stream, at the revision the inputs were read at. */
  at: StreamRevision;
  /** True for a failure the caller answers by running the command again. */
  retried: (err: unknown) => boolean;
}

export class DeciderService {
  // Keyed by spec: one store (and one warm cache) per aggregate.
  private readonly stores = new Map<object, AggregateStore<never, unknown, DomainEvent>>();

  constructor(private readonly props: DeciderServiceProps) {}

  /** Who asks, and now: the metadata every command carries. */
  context(caller: Caller): CommandContext {
    return commandContext(caller, this.props.clock);
  }

  /** A fresh id for what a command may create (a state, a run). */
  newId(): string {
    return this.props.ids.uuid();
  }

  /**
   * With `readFrom`, the append stands only while that other stream is where
   * the command's inputs were read from it (AggregateStore.handle).
   */
  async execute<C extends { metadata: CommandContext }, S, E extends DomainEvent>(
    spec: AggregateSpec<C, S, E>,
    command: C,
    readFrom?: ReadFrom,
  ): Promise<{ events: E[]; state: S }> {
    const started = performance.now();
    let answer = (): void => undefined;
    const answered = new Promise<void>((resolve) => (answer = resolve));
    const probe: HandleProbe = { queueSeconds: 0, conflicts: 0, answered };
    let decided: E[] = [];
    let outcome: CommandOutcome = 'failed';
    let code: string | undefined;
    let retried = false;
    try {
      const { events, state, readAt } = await this.storeOf(spec).handle(
        spec.streamOf(command),
        command,
        command.metadata,
        probe,
        readFrom?.at,
      );
      decided = events;
      // What it appended needs only the read models its event types feed; a
      // command that appended nothing (a retry) waits for all of them.
      await awaitReadModels(
        this.props.sync,
        readAt,
        () => spec.done(command, state),
        events.length > 0 ? [...new Set(events.map((e) => e.type))] : undefined,
      );
      outcome = events.length > 0 ? 'decided' : 'unchanged';
      return { events, state };
    } catch (err) {
      retried = readFrom?.retried(err) ?? false;
      if (err instanceof DomainError) {
        code = err.code;
        outcome = err.code === SERVER_LAGGING ? 'lagging' : 'refused';
      }
      throw err;
    } finally {
      // A snapshot this command made due is written from here on (AggregateStore).
      answer();
      // The caller runs it again: that run is the one counted.
      if (!retried)
        (this.props.metrics ?? NO_METRICS).commandRan({
          aggregate: spec.name,
          command: typeOf(command),
          outcome,
          ...(code !== undefined ? { code } : {}),
          seconds: (performance.now() - started) / 1000,
          queueSeconds: probe.queueSeconds,
          conflicts: probe.conflicts,
          events: decided,
        });
    }
  }

  /** Resolves once the snapshots being written now are written: before the database closes. */
  async snapshotsWritten(): Promise<void> {
    await Promise.all([...this.stores.values()].map((s) => s.snapshotsWritten()));
  }

  /** As kld stops: see AggregateStore.stopSnapshots. */
  async stopSnapshots(): Promise<void> {
    await Promise.all([...this.stores.values()].map((s) => s.stopSnapshots()));
  }

  /** The aggregate's current state, deciding nothing. */
  state<C extends { metadata: CommandContext }, S, E extends DomainEvent>(
    spec: AggregateSpec<C, S, E>,
    streamId: string,
  ): Promise<S> {
    return this.storeOf(spec).state(streamId);
  }

  /** The aggregate's current state and revision, read from its stream. */
  stateAt<C extends { metadata: CommandContext }, S, E extends DomainEvent>(
    spec: AggregateSpec<C, S, E>,
    streamId: string,
  ): Promise<StateAt<S>> {
    return this.storeOf(spec).stateAt(streamId);
  }

  /** What this process last saw of the aggregate, reading nothing; null when not warm. */
  warmState<C extends { metadata: CommandContext }, S, E extends DomainEvent>(
    spec: AggregateSpec<C, S, E>,
    streamId: string,
  ): StateAt<S> | null {
    return this.storeOf(spec).warmState(streamId);
  }

  private storeOf<C extends { metadata: CommandContext }, S, E extends DomainEvent>(
    spec: AggregateSpec<C, S, E>,
  ): AggregateStore<C, S, E> {
    let store = this.stores.get(spec) as AggregateStore<C, S, E> | undefined;
    if (!store) {
      store = new AggregateStore(this.props.events, this.props.snapshots, spec.decider, {
        ids: this.props.eventIds ?? this.props.ids,
        snapshotSchema: spec.snapshots.schema,
        toSnapshot: spec.snapshots.to,
        toSnapshotText: spec.snapshots.text,
        fromSnapshot: spec.snapshots.from,
        snapshotEvery: spec.snapshots.every,
        snapshotSpacing: spec.snapshots.spacing,
        cacheSize: (this.props.cache ?? DEFAULT_CACHE_BUDGETS)[spec.cacheBudget ?? 'streams'],
        snapshotFailed: (streamId, err) => this.props.snapshotFailed?.(spec.name, streamId, err),
      });
      this.stores.set(spec, store as unknown as AggregateStore<never, unknown, DomainEvent>);
    }
    return store;
  }
}

/** Commands are `{ type, data, metadata }`; the type names them in metrics. */
function typeOf(command: object): string {
  const type = (command as { type?: unknown }).type;
  return typeof type === 'string' ? type : 'unknown';
}
