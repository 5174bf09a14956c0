import {
  Module,
  OnApplicationBootstrap,
  OnApplicationShutdown,
  OnModuleDestroy,
} from '@nestjs/common';
import { QueryController } from '../infrastructure/http/query.controller';
import { StatesApiController } from '../infrastructure/http/states-api.controller';
import { LOGGER, type Logger } from '../infrastructure/logging/logger';
import { DATABASE, Database } from '../infrastructure/postgres/database';
import { METRICS, PrometheusMetrics } from '../infrastructure/metrics/prometheus-metrics';
import { SqlQueryService } from '../infrastructure/query/sql-query.service';
import { ResourceReadModel } from '../infrastructure/read-models/resource-read-model';
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
  imports: [StateModule],
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
      useFactory: (db: Database) => new ResourceReadModel(db),
      inject: [DATABASE],
    },
  ],
})
export class QueryModule {}
