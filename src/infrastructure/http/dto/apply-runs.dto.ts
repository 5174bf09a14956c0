import { Transform } from 'class-transformer';
import { IsInt, IsOptional, Max, Min } from 'class-validator';
import { IsStateName, QueryInteger } from '../request-validation';

/** `GET /v1/api/apply-runs?state=&limit=`: each at most once, as every other listing. */
export class ApplyRunsQueryDto {
  /** '' is every readable state, as when left out. */
  @Transform(({ value }: { value: unknown }) => (value === '' ? undefined : value))
  @IsOptional()
  @IsStateName()
  state?: string;

  @IsOptional()
  @QueryInteger()
  @IsInt({ message: '$property must be an integer from 1 to 10000' })
  @Min(1, { message: '$property must be an integer from 1 to 10000' })
  @Max(10_000, { message: '$property must be an integer from 1 to 10000' })
  limit?: number;
}
