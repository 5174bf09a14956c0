import { Module } from '@nestjs/common';
import { DashboardController } from '../infrastructure/http/dashboard.controller';
import { UiController } from '../infrastructure/http/ui.controller';
import { DATABASE, Database } from '../infrastructure/postgres/database';
import { DashboardReadModel } from '../infrastructure/read-models/dashboard-read-model';

/** The web dashboard at `/ui` and the read routes (`/v1/dashboard/*`) only it uses. */
@Module({
  controllers: [DashboardController, UiController],
  providers: [
    {
      provide: DashboardReadModel,
      useFactory: (db: Database) => new DashboardReadModel(db),
      inject: [DATABASE],
    },
  ],
})
export class DashboardModule {}
