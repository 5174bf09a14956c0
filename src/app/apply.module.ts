import { Module } from '@nestjs/common';
import { APPLY_RUN_COMMAND_HANDLERS } from '../application/apply-runs/apply-run-command.handlers';
import { APPLY_RUN_LOOKUP } from '../application/apply-runs/apply-run-read.port';
import { ApplyRunsController } from '../infrastructure/http/apply-runs.controller';
import { DATABASE, Database } from '../infrastructure/postgres/database';
import { ApplyReadModel } from '../infrastructure/read-models/apply-read-model';
import { ApplyProjectionsModule } from './apply-projections.module';
import { DeciderModule } from './decider.module';
import { StateModule } from './state.module';

/**
 * Parallel apply (ADR 0007): apply runs and their reservations, decided on
 * the State aggregate and recorded on their own streams (`apply-<runId>`).
 */
@Module({
  imports: [DeciderModule, ApplyProjectionsModule, StateModule],
  controllers: [ApplyRunsController],
  providers: [
    ...APPLY_RUN_COMMAND_HANDLERS,
    {
      provide: ApplyReadModel,
      useFactory: (db: Database) => new ApplyReadModel(db),
      inject: [DATABASE],
    },
    { provide: APPLY_RUN_LOOKUP, useExisting: ApplyReadModel },
  ],
})
export class ApplyModule {}
