import { Module } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { CLOCK, type Clock, IDS, type Ids } from '../application/ports/clock.port';
import {
  PROVIDER_SCHEMA_CACHE,
  type ProviderSchemaCache,
} from '../application/ports/provider-schema-cache.port';
import { ProviderConfigHistoryHandler } from '../application/refresh/provider-config-history.query';
import { REFRESH_COMMAND_HANDLERS } from '../application/refresh/refresh-command.handlers';
import {
  PROVIDER_BLOCK_SCHEMAS,
  REFRESH_STATE_LOOKUP,
} from '../application/refresh/refresh-read.port';
import { CONFIG, type Config } from '../infrastructure/config/config';
import { DriftController } from '../infrastructure/http/drift.controller';
import { ProviderConfigsController } from '../infrastructure/http/provider-configs.controller';
import { ProviderSchemasController } from '../infrastructure/http/provider-schemas.controller';
import { RefreshRunsController } from '../infrastructure/http/refresh-runs.controller';
import { StateRefreshController } from '../infrastructure/http/state-refresh.controller';
import { LOGGER, type Logger } from '../infrastructure/logging/logger';
import { DATABASE, Database } from '../infrastructure/postgres/database';
import { PostgresProviderSchemaCache } from '../infrastructure/provider/postgres-provider-schema-cache';
import { RefreshReadModel } from '../infrastructure/read-models/refresh-read-model';
import { StateDocumentReadModel } from '../infrastructure/read-models/state-document-read-model';
import { envAllowPolicy } from '../infrastructure/refresh/env-allow-list';
import { RefreshScheduler } from '../infrastructure/refresh/refresh-scheduler';
import { ServerRefreshService } from '../infrastructure/refresh/server-refresh.service';
import { systemRefreshHost } from '../infrastructure/refresh/system-refresh-host';
import { DeciderModule } from './decider.module';
import { EventStoreModule } from './event-store.module';
import { ProjectionsModule } from './projections.module';
import { RefreshProjectionsModule } from './refresh-projections.module';
import { StateModule } from './state.module';

/**
 * Refresh runs, drift, provider configs and schemas, server-side and
 * periodic refresh. Reads states through the StateModule's read model and
 * commits refreshed documents through its CommitStateCommand.
 */
@Module({
  imports: [
    DeciderModule,
    EventStoreModule,
    ProjectionsModule,
    RefreshProjectionsModule,
    StateModule,
  ],
  controllers: [
    StateRefreshController,
    RefreshRunsController,
    DriftController,
    ProviderConfigsController,
    ProviderSchemasController,
  ],
  providers: [
    ...REFRESH_COMMAND_HANDLERS,
    ProviderConfigHistoryHandler,
    {
      provide: RefreshReadModel,
      useFactory: (db: Database) => new RefreshReadModel(db),
      inject: [DATABASE],
    },
    { provide: REFRESH_STATE_LOOKUP, useExisting: RefreshReadModel },
    {
      provide: PostgresProviderSchemaCache,
      useFactory: (db: Database) => new PostgresProviderSchemaCache(db),
      inject: [DATABASE],
    },
    { provide: PROVIDER_SCHEMA_CACHE, useExisting: PostgresProviderSchemaCache },
    { provide: PROVIDER_BLOCK_SCHEMAS, useExisting: PostgresProviderSchemaCache },
    {
      provide: ServerRefreshService,
      useFactory: (
        commands: CommandBus,
        states: StateDocumentReadModel,
        refresh: RefreshReadModel,
        schemas: ProviderSchemaCache,
        config: Config,
        logger: Logger,
        clock: Clock,
        ids: Ids,
      ) =>
        new ServerRefreshService({
          commands,
          states,
          refresh,
          schemas,
          envPolicy: envAllowPolicy(config.refreshEnvAllow),
          logger,
          host: { ...systemRefreshHost(config.providerPath), clock, ids },
        }),
      inject: [
        CommandBus,
        StateDocumentReadModel,
        RefreshReadModel,
        PROVIDER_SCHEMA_CACHE,
        CONFIG,
        LOGGER,
        CLOCK,
        IDS,
      ],
    },
    {
      provide: RefreshScheduler,
      useFactory: (
        config: Config,
        db: Database,
        runs: RefreshReadModel,
        refresh: ServerRefreshService,
        logger: Logger,
      ) =>
        new RefreshScheduler(
          config.refreshEvery === null
            ? null
            : { everyMs: config.refreshEvery, states: config.refreshStates },
          db,
          runs,
          refresh,
          logger,
        ),
      inject: [CONFIG, DATABASE, RefreshReadModel, ServerRefreshService, LOGGER],
    },
  ],
})
export class RefreshModule {}
