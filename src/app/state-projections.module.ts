import { Module } from '@nestjs/common';
import { STATE_PROJECTORS } from '../projections/state';
import { EventStoreModule } from './event-store.module';

/** The State aggregate's read models (states, versions, resources, outputs, raw documents). */
@Module({ imports: [EventStoreModule], providers: [...STATE_PROJECTORS] })
export class StateProjectionsModule {}
