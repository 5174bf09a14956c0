import { Module } from '@nestjs/common';
import { APPLY_PROJECTORS } from '../projections/apply';

/** Read models of apply runs. */
@Module({ providers: [...APPLY_PROJECTORS] })
export class ApplyProjectionsModule {}
