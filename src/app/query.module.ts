import {
  Module,
  OnApplicationBootstrap,
  OnApplicationShutdown,
  OnModuleDestroy,
} from '@nestjs/common';
import { READ_MODEL_SYNC, type ReadModelSync } from '../application/ports/read-model-sync.port';
import { QueryController } from '../infrastructure/http/query.controller';
import { StatesApiController } from '../infrastructure/http/states-api.controller';
import { LOGGER, type Logger } from '../infrastructure/logging/logger';
import { DATABASE, Database } from '../infrastructure/postgres/database';
import { METRICS, PrometheusMetrics } from '../infrastructure/metrics/prometheus-metrics';
import { SqlQueryService } from '../infrastructure/query/sql-query.service';
import { ResourceReadModel } from '../infrastructure/read-models/resource-read-model';
import { versionProjections } from '../projections/state';
import { ProjectionsModule } from './projections.module';
import { StateModule } from './state.module';

/**
 * Nest owns the reader pool's lifetime: password set at start, statements
 * cancelled as shutdown begins (before the HTTP server waits for their
 * answers), pool closed at its end.
 */
class SqlQueryLifecycle implements OnApplicationBootstrap, OnModuleDestroy, OnApplicationShutdown {
  constructor(private readonly service: SqlQueryService) {}
  onApplicationBootstrap(): Promise<void> {
    return this.service.start();
  }
  onModuleDestroy(): Promise<void> {
    return this.service.stopRunning();
  }
  onApplicationShutdown(): Promise<void> {
    return this.service.close();
  }
}

/** `POST /v1/query` (SQL as kl_reader) and the JSON API `kl` reads states through. */
@Module({
  imports: [StateModule, ProjectionsModule],
  controllers: [QueryController, StatesApiController],
  providers: [
    {
      provide: SqlQueryService,
      // The reader pool reaches the same database as the owner's pool.
      useFactory: (db: Database, logger: Logger, metrics: PrometheusMetrics) => {
        const service = new SqlQueryService(db, logger);
        metrics.watchPool('query', () => service.readerPool);
        return service;
      },
      inject: [DATABASE, LOGGER, METRICS],
    },
    {
      provide: SqlQueryLifecycle,
      useFactory: (s: SqlQueryService) => new SqlQueryLifecycle(s),
      inject: [SqlQueryService],
    },
    {
      provide: ResourceReadModel,
      useFactory: (db: Database, sync: ReadModelSync) =>
        new ResourceReadModel(db, versionProjections(sync)),
      inject: [DATABASE, READ_MODEL_SYNC],
    },
  ],
})
export class QueryModule {}
