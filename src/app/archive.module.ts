import { Module } from '@nestjs/common';
import { STATE_ARCHIVES, StateArchives } from '../application/archive/state-archive';
import { CLOCK, Clock, EVENT_IDS, IDS, Ids } from '../application/ports/clock.port';
import { BULK_EVENT_STORE, EVENT_STORE, EventStore } from '../application/ports/event-store.port';
import { READ_MODEL_SYNC, ReadModelSync } from '../application/ports/read-model-sync.port';
import { ArchivesController } from '../infrastructure/http/archives.controller';
import { EventStoreModule } from './event-store.module';
import { ProjectionsModule } from './projections.module';

/** `kl archive export|import`: a state's whole history out and back in. */
@Module({
  imports: [EventStoreModule, ProjectionsModule],
  controllers: [ArchivesController],
  providers: [
    {
      provide: STATE_ARCHIVES,
      useFactory: (
        e: EventStore,
        bulk: EventStore,
        sync: ReadModelSync,
        c: Clock,
        i: Ids,
        eventIds: Ids,
      ) => new StateArchives(e, sync, c, i, eventIds, bulk),
      inject: [EVENT_STORE, BULK_EVENT_STORE, READ_MODEL_SYNC, CLOCK, IDS, EVENT_IDS],
    },
  ],
})
export class ArchiveModule {}
