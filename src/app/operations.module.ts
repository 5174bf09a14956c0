import { Module } from '@nestjs/common';
import { AdminController } from '../infrastructure/http/admin.controller';
import { HealthController } from '../infrastructure/http/health.controller';
import { ProjectionsModule } from './projections.module';

/** Health, readiness, version, and the projection maintenance endpoints. */
@Module({
  imports: [ProjectionsModule],
  controllers: [HealthController, AdminController],
})
export class OperationsModule {}
