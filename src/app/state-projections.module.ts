import { Module } from '@nestjs/common';
import { ServedInstanceBytes } from '../application/state/served-instance-bytes';
import { STATE_PROJECTORS } from '../projections/state';
import { EventStoreModule } from './event-store.module';

/**
 * The State aggregate's read models (states, versions, resources, outputs, raw
 * documents); exports the served bytes of instances, which the commit handler
 * warms for the raw-state projector.
 */
@Module({
  imports: [EventStoreModule],
  providers: [
    ...STATE_PROJECTORS,
    { provide: ServedInstanceBytes, useFactory: () => new ServedInstanceBytes() },
  ],
  exports: [ServedInstanceBytes],
})
export class StateProjectionsModule {}
