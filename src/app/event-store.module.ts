import { Inject, Module, OnApplicationShutdown } from '@nestjs/common';
import type { PoolConfig } from 'pg';
import { BULK_EVENT_STORE, EVENT_STORE } from '../application/ports/event-store.port';
import { SNAPSHOT_STORE } from '../application/ports/snapshot-store.port';
import { PostgresEventStore } from '../infrastructure/event-store/postgres-event-store';
import { PostgresSnapshotStore } from '../infrastructure/event-store/postgres-snapshot-store';
import { meteredEventStore } from '../infrastructure/metrics/metered-event-store';
import { METRICS, PrometheusMetrics } from '../infrastructure/metrics/prometheus-metrics';
import { CONFIG, type Config } from '../infrastructure/config/config';
import { DATABASE, Database } from '../infrastructure/postgres/database';
import { NOTIFIER, Notifier } from '../infrastructure/postgres/notifier';
import { takingTurns } from '../infrastructure/postgres/turn-taking-pool';

/**
 * The event store's own pool on the same database. A projection batch holds
 * a read-model connection while it reads its events through the port: on one
 * shared pool, batches waiting for their projector's lock could hold every
 * connection those reads need.
 */
const EVENTS_DATABASE = Symbol('EventsDatabase');
/** The bulk readers' Database (bulkDatabase): exported for tests that hold its connections. */
export const BULK_DATABASE = Symbol('BulkDatabase');

/**
 * Connections of the bulk readers' pool (BULK_EVENT_STORE). Each reader
 * holds one for a page at a time, so more readers wait their turn a page
 * long each, while terraform's commands never wait behind them. Two: on a
 * two-core machine four of them left another caller's LOCK and POST of a
 * small state 160-710 ms under four exports, two 80-250 ms
 * (bench/caller-flood.ts, docs/performance-history.md).
 */
const BULK_CONNECTIONS = 2;

/**
 * The bulk readers' pool. Waiting for a turn is not waiting for PostgreSQL:
 * the connect timeout bounds only the connects (turn-taking-pool.ts).
 * `options`: for tests.
 */
export function bulkDatabase(url: string, options: Partial<PoolConfig> = {}): Database {
  const bulk = new Database(url, { max: BULK_CONNECTIONS, ...options });
  takingTurns(bulk.pool, options.max ?? BULK_CONNECTIONS);
  return bulk;
}

/** The event store and aggregate snapshots, bound to their ports. */
@Module({
  providers: [
    {
      provide: EVENTS_DATABASE,
      useFactory: (db: Database, metrics: PrometheusMetrics) => {
        const events = new Database(db.url, { max: 10 });
        metrics.watchPool('events', events.pool);
        return events;
      },
      inject: [DATABASE, METRICS],
    },
    {
      provide: BULK_DATABASE,
      useFactory: (db: Database, metrics: PrometheusMetrics) => {
        const bulk = bulkDatabase(db.url);
        metrics.watchPool('bulk', bulk.pool);
        return bulk;
      },
      inject: [DATABASE, METRICS],
    },
    {
      provide: BULK_EVENT_STORE,
      // Reads only: nothing appended through it, so no appends held for readAppended.
      useFactory: (db: Database, n: Notifier) => new PostgresEventStore(db, n, undefined, 0),
      inject: [BULK_DATABASE, NOTIFIER],
    },
    {
      provide: EVENT_STORE,
      useFactory: (db: Database, n: Notifier, metrics: PrometheusMetrics, config: Config) =>
        meteredEventStore(
          new PostgresEventStore(db, n, undefined, config.cache.heldEvents),
          metrics,
        ),
      inject: [EVENTS_DATABASE, NOTIFIER, METRICS, CONFIG],
    },
    {
      provide: SNAPSHOT_STORE,
      useFactory: (db: Database, commands: Database) =>
        new PostgresSnapshotStore(db, { othersBusy: () => db.busy() || commands.busy() }),
      inject: [EVENTS_DATABASE, DATABASE],
    },
  ],
  exports: [EVENT_STORE, BULK_EVENT_STORE, SNAPSHOT_STORE],
})
export class EventStoreModule implements OnApplicationShutdown {
  constructor(
    @Inject(EVENTS_DATABASE) private readonly db: Database,
    @Inject(BULK_DATABASE) private readonly bulk: Database,
  ) {}

  // Nest shuts the modules that import this one down first (the runner stops
  // reading), then this one.
  async onApplicationShutdown(): Promise<void> {
    await Promise.all([this.db.close(), this.bulk.close()]);
  }
}
