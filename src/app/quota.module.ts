import { Module } from '@nestjs/common';
import { QUOTA_COMMAND_HANDLERS } from '../application/quota/quota-commands';
import { QuotasController } from '../infrastructure/http/quotas.controller';
import { DATABASE, Database } from '../infrastructure/postgres/database';
import { QuotaReadModel } from '../infrastructure/read-models/quota-read-model';
import { DeciderModule } from './decider.module';
import { QuotaProjectionsModule } from './quota-projections.module';

/**
 * Quotas (`kl quota`, `/v1/quotas`): the rules, usage and plan checks. The
 * State aggregate's commands read the rules themselves (withQuota), so the
 * backend enforces them whether or not this slice is composed.
 */
@Module({
  imports: [DeciderModule, QuotaProjectionsModule],
  controllers: [QuotasController],
  providers: [
    ...QUOTA_COMMAND_HANDLERS,
    {
      provide: QuotaReadModel,
      useFactory: (db: Database) => new QuotaReadModel(db),
      inject: [DATABASE],
    },
  ],
})
export class QuotaModule {}
