import { IsInt, IsOptional, IsString, Max, Min, MinLength } from 'class-validator';
import { IsStateName, QueryInteger } from '../request-validation';

const OFFSET = { message: '$property must be a non-negative integer' };
const LIMIT = { message: '$property must be an integer from 1 to 500' };

/** `GET /v1/dashboard/changes?state=` */
export class DashboardStateQueryDto {
  @IsStateName()
  state!: string;
}

/** `GET /v1/dashboard/resources`: every filter optional; `module=` (empty) is the root module. */
export class DashboardResourcesQueryDto {
  @IsStateName()
  state!: string;

  @IsOptional()
  @IsString()
  type?: string;

  @IsOptional()
  @IsString()
  module?: string;

  @IsOptional()
  @IsString()
  provider?: string;

  @IsOptional()
  @IsString()
  address_glob?: string;

  @IsOptional()
  @QueryInteger()
  @IsInt(OFFSET)
  @Min(0, OFFSET)
  offset?: number;

  @IsOptional()
  @QueryInteger()
  @IsInt(LIMIT)
  @Min(1, LIMIT)
  @Max(500, LIMIT)
  limit?: number;
}

/** `GET /v1/dashboard/dependencies?state=&address=` */
export class DashboardDependenciesQueryDto {
  @IsStateName()
  state!: string;

  @IsString()
  @MinLength(1)
  address!: string;
}
