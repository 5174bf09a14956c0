import type { Provider, Type } from '@nestjs/common';
import { CLOCK, Clock, IDS, Ids } from '../application/ports/clock.port';
import { EVENT_STORE, EventStore } from '../application/ports/event-store.port';
import { READ_MODEL_SYNC, ReadModelSync } from '../application/ports/read-model-sync.port';
import { SNAPSHOT_STORE, SnapshotStore } from '../application/ports/snapshot-store.port';
import { STATE_AGGREGATE, StateAggregateService } from '../application/state/state-aggregate';
import { STATE_COMMAND_HANDLERS } from '../application/state/state-command.handlers';
import { TerraformBackendController } from '../infrastructure/http/terraform-backend.controller';
import type { Database } from '../infrastructure/postgres/database';
import { StateReadModel } from '../infrastructure/read-models/state-read-model';
import { ProjectionRunner } from '../projections/projection-runner';
import type { Projector } from '../projections/projector';
import { stateProjectors } from '../projections/state';
import { DATABASE } from './tokens';

/** A vertical slice: its HTTP controllers, its providers and its projectors. */
export interface Feature {
  controllers: Type<unknown>[];
  providers: Provider[];
  projectors(db: Database): Projector[];
}

export const stateFeature: Feature = {
  controllers: [TerraformBackendController],
  providers: [
    ...STATE_COMMAND_HANDLERS,
    { provide: READ_MODEL_SYNC, useExisting: ProjectionRunner },
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
  projectors: (db) => stateProjectors(db),
};
