import { Module } from '@nestjs/common';
import { QUOTA_PROJECTORS } from '../projections/quota/quotas.projector';

/** Read models of quotas: the rules and the overruns commits recorded. */
@Module({ providers: [...QUOTA_PROJECTORS] })
export class QuotaProjectionsModule {}
