import { Module } from '@nestjs/common';
import { REFRESH_PROJECTORS } from '../projections/refresh';

/** Read models of refresh runs and provider configs. */
@Module({ providers: [...REFRESH_PROJECTORS] })
export class RefreshProjectionsModule {}
