import { Module } from '@nestjs/common';
import { AdminController } from '../infrastructure/http/admin.controller';
import { HealthController } from '../infrastructure/http/health.controller';
import { MetricsController } from '../infrastructure/metrics/metrics.controller';
import { ProjectionsModule } from './projections.module';

/** Health, readiness, version, metrics, and the projection maintenance endpoints. */
@Module({
  imports: [ProjectionsModule],
  controllers: [HealthController, AdminController, MetricsController],
})
export class OperationsModule {}
