import { BeforeApplicationShutdown, Inject, Module } from '@nestjs/common';
import { DeciderService } from '../application/decider.service';
import { CLOCK, Clock, EVENT_IDS, IDS, Ids } from '../application/ports/clock.port';
import { EVENT_STORE, EventStore } from '../application/ports/event-store.port';
import { COMMAND_METRICS, CommandMetrics } from '../application/ports/metrics.port';
import { READ_MODEL_SYNC, ReadModelSync } from '../application/ports/read-model-sync.port';
import { SNAPSHOT_STORE, SnapshotStore } from '../application/ports/snapshot-store.port';
import { CONFIG, type Config } from '../infrastructure/config/config';
import { LOGGER, type Logger } from '../infrastructure/logging/logger';
import { EventStoreModule } from './event-store.module';
import { ProjectionsModule } from './projections.module';

/** The one service every command handler decides and appends through. */
@Module({
  imports: [EventStoreModule, ProjectionsModule],
  providers: [
    {
      provide: DeciderService,
      useFactory: (
        events: EventStore,
        snapshots: SnapshotStore,
        sync: ReadModelSync,
        clock: Clock,
        ids: Ids,
        eventIds: Ids,
        config: Config,
        metrics: CommandMetrics,
        logger: Logger,
      ) =>
        new DeciderService({
          events,
          snapshots,
          sync,
          clock,
          ids,
          eventIds,
          cache: config.cache,
          metrics,
          snapshotFailed: (aggregate, streamId, err) =>
            logger.warn({ err, aggregate, streamId }, 'snapshot not written'),
        }),
      inject: [
        EVENT_STORE,
        SNAPSHOT_STORE,
        READ_MODEL_SYNC,
        CLOCK,
        IDS,
        EVENT_IDS,
        CONFIG,
        COMMAND_METRICS,
        LOGGER,
      ],
    },
  ],
  exports: [DeciderService],
})
export class DeciderModule implements BeforeApplicationShutdown {
  constructor(@Inject(DeciderService) private readonly decider: DeciderService) {}

  // Snapshots are written after their command answered: let those being
  // written finish before the event store's pool closes. One whose command
  // waits for its read models is not waited for: only the projection's stop,
  // which comes after this, ends that wait (a stop that waited for it
  // overran its deadline).
  beforeApplicationShutdown(): Promise<void> {
    return this.decider.stopSnapshots();
  }
}
