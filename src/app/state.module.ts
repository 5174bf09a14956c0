import { Module } from '@nestjs/common';
import { CLOCK, Clock, IDS, Ids } from '../application/ports/clock.port';
import { EVENT_STORE, EventStore } from '../application/ports/event-store.port';
import { READ_MODEL_SYNC, ReadModelSync } from '../application/ports/read-model-sync.port';
import { SNAPSHOT_STORE, SnapshotStore } from '../application/ports/snapshot-store.port';
import { STATE_AGGREGATE, StateAggregateService } from '../application/state/state-aggregate';
import { STATE_COMMAND_HANDLERS } from '../application/state/state-command.handlers';
import { TerraformBackendController } from '../infrastructure/http/terraform-backend.controller';
import { DATABASE, Database } from '../infrastructure/postgres/database';
import { StateReadModel } from '../infrastructure/read-models/state-read-model';
import { EventStoreModule } from './event-store.module';
import { ProjectionsModule } from './projections.module';
import { StateProjectionsModule } from './state-projections.module';

/**
 * The State aggregate: Terraform's HTTP backend, the lock/commit/delete
 * commands, and its read models. Exports the StateReadModel other slices
 * read states through.
 */
@Module({
  imports: [EventStoreModule, ProjectionsModule, StateProjectionsModule],
  controllers: [TerraformBackendController],
  providers: [
    ...STATE_COMMAND_HANDLERS,
    {
      provide: STATE_AGGREGATE,
      useFactory: (e: EventStore, s: SnapshotStore, sync: ReadModelSync, c: Clock, i: Ids) =>
        new StateAggregateService(e, s, sync, c, i),
      inject: [EVENT_STORE, SNAPSHOT_STORE, READ_MODEL_SYNC, CLOCK, IDS],
    },
    {
      provide: StateReadModel,
      useFactory: (db: Database) => new StateReadModel(db),
      inject: [DATABASE],
    },
  ],
  exports: [StateReadModel],
})
export class StateModule {}
