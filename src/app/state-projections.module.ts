import { Module } from '@nestjs/common';
import { ServedInstanceBytes } from '../application/state/served-instance-bytes';
import { WrittenChunks } from '../application/state/written-chunks';
import { CONFIG, type Config } from '../infrastructure/config/config';
import { STATE_PROJECTORS } from '../projections/state';
import { EventStoreModule } from './event-store.module';

/**
 * The State aggregate's read models (states, versions, resources, outputs, raw
 * documents); exports the served bytes of instances, which the commit handler
 * warms for the raw-state projector, and the chunks that projector wrote
 * last, which the document read model serves from.
 */
@Module({
  imports: [EventStoreModule],
  providers: [
    ...STATE_PROJECTORS,
    { provide: ServedInstanceBytes, useFactory: () => new ServedInstanceBytes() },
    {
      provide: WrittenChunks,
      useFactory: (config: Config) => new WrittenChunks(config.cache.servedBytes),
      inject: [CONFIG],
    },
  ],
  exports: [ServedInstanceBytes, WrittenChunks],
})
export class StateProjectionsModule {}
