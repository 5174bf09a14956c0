import { Inject, Module, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { DiscoveryModule, DiscoveryService } from '@nestjs/core';
import { EVENT_STORE, type EventStore } from '../application/ports/event-store.port';
import { PROJECTION_ADMIN } from '../application/ports/projection-admin.port';
import { READ_MODEL_SYNC } from '../application/ports/read-model-sync.port';

import { CONFIG, type Config } from '../infrastructure/config/config';
import { LOGGER, type Logger } from '../infrastructure/logging/logger';
import { METRICS, PrometheusMetrics } from '../infrastructure/metrics/prometheus-metrics';
import { projectionLag } from '../infrastructure/metrics/projection-lag';
import { DATABASE, Database } from '../infrastructure/postgres/database';
import { NOTIFIER, Notifier } from '../infrastructure/postgres/notifier';
import { ProjectionRunner } from '../projections/projection-runner';
import { Projector } from '../projections/projector';
import { EventStoreModule } from './event-store.module';

/**
 * The projection runner and the read-your-writes wait commands answer
 * after. Slices list their projector classes (marked `@Projector()`) in
 * their own modules; this module registers every one it finds with the
 * runner at module init, before anything runs, the way @nestjs/cqrs
 * registers command handlers with the bus. kld starts the runner once it
 * listens; it stops when the application shuts down, after the HTTP server
 * closed and before the event store it reads from does.
 */
@Module({
  imports: [DiscoveryModule, EventStoreModule],
  providers: [
    {
      provide: ProjectionRunner,
      useFactory: (
        events: EventStore,
        db: Database,
        notifier: Notifier,
        logger: Logger,
        config: Config,
      ) =>
        new ProjectionRunner({
          events,
          db,
          notifier,
          logger,
          unloggedReadModels: config.unloggedReadModels,
        }),
      inject: [EVENT_STORE, DATABASE, NOTIFIER, LOGGER, CONFIG],
    },
    { provide: READ_MODEL_SYNC, useExisting: ProjectionRunner },
    { provide: PROJECTION_ADMIN, useExisting: ProjectionRunner },
  ],
  exports: [ProjectionRunner, READ_MODEL_SYNC, PROJECTION_ADMIN],
})
export class ProjectionsModule implements OnModuleInit, OnApplicationShutdown {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly runner: ProjectionRunner,
    @Inject(DATABASE) private readonly db: Database,
    @Inject(METRICS) private readonly metrics: PrometheusMetrics,
  ) {}

  onModuleInit(): void {
    const found = this.discovery
      .getProviders({ metadataKey: Projector.KEY })
      .map((wrapper) => wrapper.instance as Projector | undefined);
    this.runner.register([...new Set(found)].filter((p): p is Projector => p !== undefined));
    this.metrics.watchProjections(() =>
      projectionLag(
        this.db,
        this.runner.names(),
        new Set(this.runner.halted().map((h) => h.projector)),
      ),
    );
  }

  onApplicationShutdown(): Promise<void> {
    return this.runner.stop();
  }
}
