import type { Pool } from 'pg';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type {
  CommandMetrics,
  CommandObservation,
  CommitObservation,
  RefreshRunObservation,
} from '../../application/ports/metrics.port';
import type { DomainEvent } from '../../domain/shared/event';
import type { SubscriberLag } from './feed-subscribers';

/** DI token of the process's PrometheusMetrics. */
export const METRICS = Symbol('Metrics');

/** A projector's distance behind the log, as `/metrics` reports it. */
export interface ProjectionLag {
  projector: string;
  /** Committed events it has not applied. */
  events: number;
  /** Age of the oldest of them; 0 when there is none. */
  seconds: number;
  halted: boolean;
}

// Seconds: from a sub-millisecond lock to a commit of a very large state.
const LATENCY_BUCKETS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
];
const SIZE_BUCKETS = [
  1024,
  16 * 1024,
  128 * 1024,
  1024 ** 2,
  8 * 1024 ** 2,
  64 * 1024 ** 2,
  512 * 1024 ** 2,
];
const COUNT_BUCKETS = [0, 1, 2, 5, 10, 50, 100, 500, 1000, 10_000, 100_000];
const REFRESH_BUCKETS = [1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600];

const RESERVATION_EVENTS: Record<string, string | undefined> = {
  ReservationAcquired: 'acquired',
  ReservationRenewed: 'renewed',
  ReservationReleased: 'released',
  ReservationExpired: 'expired',
};

/** Instances whose lifecycle the events closed or opened. */
function changedInstances(events: readonly DomainEvent[]): number {
  const addresses = new Set<string>();
  for (const e of events) {
    if (e.type === 'LifecycleOpened' || e.type === 'LifecycleClosed') {
      addresses.add((e.data as { address: string }).address);
    }
  }
  return addresses.size;
}

/**
 * kld's metrics on a registry of its own (several servers may share a
 * process in tests). Everything is named `kilolock_…` except prom-client's
 * standard process and Node.js metrics. docs/metrics.md describes each.
 */
export class PrometheusMetrics implements CommandMetrics {
  readonly registry = new Registry();
  private readonly pools = new Map<string, () => Pool | null>();
  private lagSource: (() => Promise<ProjectionLag[]>) | null = null;
  private subscriberSource: (() => Promise<SubscriberLag[]>) | null = null;

  readonly httpDuration = new Histogram({
    name: 'kilolock_http_request_duration_seconds',
    help: 'HTTP requests by method, route template and status, from arrival to the last byte sent',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  private readonly commands = new Histogram({
    name: 'kilolock_command_duration_seconds',
    help: 'Commands by aggregate, type and outcome, until their read models include them',
    labelNames: ['aggregate', 'command', 'outcome', 'code'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  private readonly queueWait = new Histogram({
    name: 'kilolock_stream_queue_wait_seconds',
    help: 'Time a command waited behind earlier commands on the same stream in this process',
    labelNames: ['aggregate'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  private readonly appendConflicts = new Counter({
    name: 'kilolock_append_conflicts_total',
    help: 'Appends lost to a concurrent writer (another replica) and decided again',
    labelNames: ['aggregate'] as const,
    registers: [this.registry],
  });
  private readonly lockConflicts = new Counter({
    name: 'kilolock_lock_conflicts_total',
    help: 'LOCK requests refused because another lock holds the state (423)',
    registers: [this.registry],
  });
  private readonly reservationConflicts = new Counter({
    name: 'kilolock_reservation_conflicts_total',
    help: 'kl apply reservations refused because another run or a lock holds what they ask for',
    registers: [this.registry],
  });
  private readonly reservations = new Counter({
    name: 'kilolock_reservation_events_total',
    help: 'Reservation events appended by this replica: acquired, renewed, released, expired',
    labelNames: ['event'] as const,
    registers: [this.registry],
  });
  private readonly commitDuration = new Histogram({
    name: 'kilolock_commit_duration_seconds',
    help: 'State commits by outcome and kind (document: terraform, kl import, refresh; delta: kl apply), until read models include them',
    labelNames: ['outcome', 'kind'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  private readonly commitSize = new Histogram({
    name: 'kilolock_commit_size_bytes',
    help: 'Size of committed state documents as received',
    buckets: SIZE_BUCKETS,
    registers: [this.registry],
  });
  private readonly instancesChanged = new Histogram({
    name: 'kilolock_commit_instances_changed',
    help: 'Resource instances a commit added, changed or removed, by kind (document, delta)',
    labelNames: ['kind'] as const,
    buckets: COUNT_BUCKETS,
    registers: [this.registry],
  });
  readonly appendDuration = new Histogram({
    name: 'kilolock_event_store_append_duration_seconds',
    help: 'Event-store appends by outcome (ok, conflict, error)',
    labelNames: ['outcome'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  readonly eventsAppended = new Counter({
    name: 'kilolock_events_appended_total',
    help: 'Events appended to the log, by type',
    labelNames: ['type'] as const,
    registers: [this.registry],
  });
  private readonly refreshRuns = new Counter({
    name: 'kilolock_refresh_runs_total',
    help: 'Refresh runs finished, by status',
    labelNames: ['status'] as const,
    registers: [this.registry],
  });
  private readonly refreshDuration = new Histogram({
    name: 'kilolock_refresh_run_duration_seconds',
    help: 'Refresh runs from start to finish, by status',
    labelNames: ['status'] as const,
    buckets: REFRESH_BUCKETS,
    registers: [this.registry],
  });
  private readonly lagEvents = new Gauge({
    name: 'kilolock_projection_lag_events',
    help: 'Committed events a projector has not applied yet',
    labelNames: ['projector'] as const,
    registers: [this.registry],
  });
  private readonly lagSeconds = new Gauge({
    name: 'kilolock_projection_lag_seconds',
    help: 'Age of the oldest committed event a projector has not applied (0 when caught up)',
    labelNames: ['projector'] as const,
    registers: [this.registry],
  });
  private readonly halted = new Gauge({
    name: 'kilolock_projection_halted',
    help: '1 while a projector is halted at an event it cannot apply',
    labelNames: ['projector'] as const,
    registers: [this.registry],
  });
  private readonly lagUp = new Gauge({
    name: 'kilolock_projection_lag_up',
    help: '1 when the projection and subscriber lag could be read at this scrape, 0 when the database did not answer',
    registers: [this.registry],
  });
  private readonly subscribers = new Gauge({
    name: 'kilolock_event_subscribers',
    help: 'Open event-feed subscriptions on this replica, by transport (grpc, sse)',
    labelNames: ['transport'] as const,
    registers: [this.registry],
  });
  private readonly subscriberLagEvents = new Gauge({
    name: 'kilolock_event_subscriber_lag_events',
    help: "Committed events after the furthest-behind subscriber's position, by transport",
    labelNames: ['transport'] as const,
    registers: [this.registry],
  });
  private readonly subscriberLagSeconds = new Gauge({
    name: 'kilolock_event_subscriber_lag_seconds',
    help: 'Age of the oldest event the furthest-behind subscriber has not been sent (0 when none), by transport',
    labelNames: ['transport'] as const,
    registers: [this.registry],
  });

  constructor(options: { processMetrics?: boolean } = {}) {
    if (options.processMetrics !== false) collectDefaultMetrics({ register: this.registry });
    const pools = this.pools;
    new Gauge({
      name: 'kilolock_db_pool_connections',
      help: 'Connections of each database pool: total open, idle, and requests waiting for one',
      labelNames: ['pool', 'state'] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [name, poolOf] of pools) {
          const pool = poolOf();
          if (!pool) continue;
          this.set({ pool: name, state: 'total' }, pool.totalCount);
          this.set({ pool: name, state: 'idle' }, pool.idleCount);
          this.set({ pool: name, state: 'waiting' }, pool.waitingCount);
        }
      },
    });
    new Gauge({
      name: 'kilolock_db_pool_max_connections',
      help: 'The most connections each database pool opens',
      labelNames: ['pool'] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [name, poolOf] of pools) {
          const pool = poolOf();
          if (pool) this.set({ pool: name }, pool.options.max ?? 10);
        }
      },
    });
  }

  /** Reports a database pool's use under `name` (a pool opened later: a function). */
  watchPool(name: string, pool: Pool | (() => Pool | null)): void {
    this.pools.set(name, typeof pool === 'function' ? pool : () => pool);
  }

  /** Where the projection lag is read from at each scrape (ProjectionsModule sets it). */
  watchProjections(source: () => Promise<ProjectionLag[]>): void {
    this.lagSource = source;
  }

  /** Where the event-feed subscribers' count and lag are read from (EventsModule sets it). */
  watchSubscribers(source: () => Promise<SubscriberLag[]>): void {
    this.subscriberSource = source;
  }

  /** The text Prometheus scrapes. */
  async scrape(): Promise<{ contentType: string; body: string }> {
    await this.readLag();
    await this.readSubscribers();
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  private async readLag(): Promise<void> {
    if (!this.lagSource) return;
    try {
      const lags = await this.lagSource();
      this.lagEvents.reset();
      this.lagSeconds.reset();
      this.halted.reset();
      for (const lag of lags) {
        this.lagEvents.set({ projector: lag.projector }, lag.events);
        this.lagSeconds.set({ projector: lag.projector }, lag.seconds);
        this.halted.set({ projector: lag.projector }, lag.halted ? 1 : 0);
      }
      this.lagUp.set(1);
    } catch {
      // The last values stay; kilolock_projection_lag_up says they are stale.
      this.lagUp.set(0);
    }
  }

  private async readSubscribers(): Promise<void> {
    if (!this.subscriberSource) return;
    try {
      for (const lag of await this.subscriberSource()) {
        this.subscribers.set({ transport: lag.transport }, lag.subscribers);
        this.subscriberLagEvents.set({ transport: lag.transport }, lag.events);
        this.subscriberLagSeconds.set({ transport: lag.transport }, lag.seconds);
      }
    } catch {
      this.lagUp.set(0);
    }
  }

  commandRan(o: CommandObservation): void {
    this.commands.observe(
      { aggregate: o.aggregate, command: o.command, outcome: o.outcome, code: o.code ?? '' },
      o.seconds,
    );
    this.queueWait.observe({ aggregate: o.aggregate }, o.queueSeconds);
    if (o.conflicts > 0) this.appendConflicts.inc({ aggregate: o.aggregate }, o.conflicts);
    if (o.command === 'LockState' && o.code === 'STATE.LOCKED') this.lockConflicts.inc();
    if (
      o.command === 'AcquireReservations' &&
      (o.code === 'RESERVATION.CONFLICT' || o.code === 'STATE.LOCKED')
    ) {
      this.reservationConflicts.inc();
    }
    for (const e of o.events) {
      const event = RESERVATION_EVENTS[e.type];
      if (event) this.reservations.inc({ event });
    }
    // Row-level commits of kl apply; document commits report through commitRan.
    if (o.command === 'CommitDelta') {
      this.commitDuration.observe({ outcome: o.outcome, kind: 'delta' }, o.seconds);
      if (o.outcome === 'decided') {
        this.instancesChanged.observe({ kind: 'delta' }, changedInstances(o.events));
      }
    }
  }

  commitRan(o: CommitObservation): void {
    this.commitDuration.observe({ outcome: o.outcome, kind: 'document' }, o.seconds);
    if (o.outcome === 'decided') {
      this.commitSize.observe(o.bytes);
      this.instancesChanged.observe({ kind: 'document' }, o.instancesChanged);
    }
  }

  refreshRunFinished(o: RefreshRunObservation): void {
    this.refreshRuns.inc({ status: o.status });
    if (o.seconds !== null) this.refreshDuration.observe({ status: o.status }, o.seconds);
  }
}
