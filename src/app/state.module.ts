import { Module } from '@nestjs/common';
import { DocumentTextMemo } from '../application/state/document-text-memo';
import { InstanceHashMemo } from '../application/state/instance-hash-memo';
import { ServedInstanceBytes } from '../application/state/served-instance-bytes';
import { WrittenChunks } from '../application/state/written-chunks';
import { STATE_COMMAND_HANDLERS } from '../application/state/state-command.handlers';
import { READ_MODEL_SYNC, type ReadModelSync } from '../application/ports/read-model-sync.port';
import { CONFIG, type Config } from '../infrastructure/config/config';
import { TerraformBackendController } from '../infrastructure/http/terraform-backend.controller';
import { DATABASE, Database } from '../infrastructure/postgres/database';
import { StateCatalogReadModel } from '../infrastructure/read-models/state-catalog-read-model';
import { StateDocumentReadModel } from '../infrastructure/read-models/state-document-read-model';
import { versionProjections } from '../projections/state';
import { AuthenticationModule } from './authentication.module';
import { DeciderModule } from './decider.module';
import { ProjectionsModule } from './projections.module';
import { StateProjectionsModule } from './state-projections.module';

/**
 * The State aggregate: Terraform's HTTP backend, the lock/commit/delete
 * commands, and its read models. Exports the document and catalog read
 * models other slices read states through.
 */
@Module({
  imports: [DeciderModule, ProjectionsModule, StateProjectionsModule, AuthenticationModule],
  controllers: [TerraformBackendController],
  providers: [
    ...STATE_COMMAND_HANDLERS,
    {
      provide: InstanceHashMemo,
      useFactory: (config: Config) =>
        new InstanceHashMemo({ maxInstances: config.cache.hashInstances }),
      inject: [CONFIG],
    },
    {
      provide: DocumentTextMemo,
      // The served bytes the raw-state projector makes of each instance tell
      // where a document terraform wrote has its instances (no scan).
      useFactory: (config: Config, served: ServedInstanceBytes) =>
        new DocumentTextMemo({
          maxInstances: config.cache.hashInstances,
          served: served.encoding.bytes,
        }),
      inject: [CONFIG, ServedInstanceBytes],
    },
    {
      provide: StateDocumentReadModel,
      useFactory: (db: Database, config: Config, written: WrittenChunks, sync: ReadModelSync) =>
        new StateDocumentReadModel(db, {
          cacheBytes: config.cache.servedBytes,
          written,
          projections: versionProjections(sync),
        }),
      inject: [DATABASE, CONFIG, WrittenChunks, READ_MODEL_SYNC],
    },
    {
      provide: StateCatalogReadModel,
      useFactory: (db: Database) => new StateCatalogReadModel(db),
      inject: [DATABASE],
    },
  ],
  exports: [StateDocumentReadModel, StateCatalogReadModel],
})
export class StateModule {}
