import { Module } from '@nestjs/common';
import { StateEngineController } from '../infrastructure/http/state-engine.controller';
import { DATABASE, Database } from '../infrastructure/postgres/database';
import { StateEngineReadModel } from '../infrastructure/read-models/state-engine-read-model';
import { ApplyModule } from './apply.module';
import { EventStoreModule } from './event-store.module';
import { ProjectionsModule } from './projections.module';

/**
 * The state-engine lane (ADR 0029): scope expansion and slices over the
 * read models; its writes are apply runs (ApplyModule's use cases) on lane
 * `state-engine`.
 */
@Module({
  imports: [ApplyModule, EventStoreModule, ProjectionsModule],
  controllers: [StateEngineController],
  providers: [
    {
      provide: StateEngineReadModel,
      useFactory: (db: Database) => new StateEngineReadModel(db),
      inject: [DATABASE],
    },
  ],
})
export class StateEngineModule {}
