import { IsInt, IsOptional, IsString } from 'class-validator';
import { IsStateName, QueryInteger } from '../request-validation';

const WHOLE = { message: '$property must be a whole number' };
const NON_NEGATIVE = { message: '$property must be a non-negative integer' };

/** `POST /v1/quotas`; the glob and the limits' ranges are checked by the quota decider. */
export class SetQuotaDto {
  @IsString()
  glob!: string;

  @IsInt(WHOLE)
  max_resources!: number;

  @IsOptional()
  @IsInt(WHOLE)
  soft_resources?: number;
}

/** `DELETE /v1/quotas?glob=GLOB` */
export class QuotaGlobQueryDto {
  @IsString()
  glob!: string;
}

/** `GET /v1/quotas?state=NAME`: one state, or every readable state with a quota. */
export class QuotaUsageQueryDto {
  @IsOptional()
  @IsStateName()
  state?: string;
}

/** `GET /v1/quotas/check?state=NAME&creates=N&deletes=M`: would a plan fit? */
export class QuotaCheckQueryDto {
  @IsStateName()
  state!: string;

  @QueryInteger()
  @IsInt(NON_NEGATIVE)
  creates!: number;

  @QueryInteger()
  @IsInt(NON_NEGATIVE)
  deletes!: number;
}
