import { Module } from '@nestjs/common';
import { STATE_PROJECTORS } from '../projections/state';

/** The State aggregate's read models (states, versions, resources, outputs, raw documents). */
@Module({ providers: [...STATE_PROJECTORS] })
export class StateProjectionsModule {}
