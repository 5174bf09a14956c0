import { Module, OnModuleInit } from '@nestjs/common';
import { DiscoveryModule, DiscoveryService } from '@nestjs/core';
import { READ_MODEL_SYNC } from '../application/ports/read-model-sync.port';
import { NOTIFIER, Notifier } from '../infrastructure/event-store/notifier';
import { LOGGER, type Logger } from '../infrastructure/logging/logger';
import { DATABASE, Database } from '../infrastructure/postgres/database';
import { ProjectionRunner } from '../projections/projection-runner';
import { Projector } from '../projections/projector';

/**
 * The projection runner and the read-your-writes wait commands answer
 * after. Slices list their projector classes (marked `@Projector()`) in
 * their own modules; this module registers every one it finds with the
 * runner at module init, before anything runs, the way @nestjs/cqrs
 * registers command handlers with the bus.
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    {
      provide: ProjectionRunner,
      useFactory: (db: Database, notifier: Notifier, logger: Logger) =>
        new ProjectionRunner({ db, notifier, logger }),
      inject: [DATABASE, NOTIFIER, LOGGER],
    },
    { provide: READ_MODEL_SYNC, useExisting: ProjectionRunner },
  ],
  exports: [ProjectionRunner, READ_MODEL_SYNC],
})
export class ProjectionsModule implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly runner: ProjectionRunner,
  ) {}

  onModuleInit(): void {
    const found = this.discovery
      .getProviders({ metadataKey: Projector.KEY })
      .map((wrapper) => wrapper.instance as Projector | undefined);
    this.runner.register([...new Set(found)].filter((p): p is Projector => p !== undefined));
  }
}
