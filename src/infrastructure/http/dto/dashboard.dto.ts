import { IsBoolean, IsIn, IsInt, IsOptional, IsString, Max, Min, MinLength } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import { STATE_SORTS } from '../../../domain/wire/dashboard';
import { IsStateName, IsStorableText, QueryBoolean, QueryInteger } from '../request-validation';

const OFFSET = { message: '$property must be a non-negative integer' };
const LIMIT = { message: '$property must be an integer from 1 to 500' };

/**
 * `GET /v1/dashboard/states`: without `limit`, every listed state (as before
 * paging existed); with it, one page of them.
 */
export class DashboardStatesQueryDto {
  @JSONSchema({
    description: 'Names matching this glob: `*` any run of characters (slashes too), `?` one',
  })
  @IsOptional()
  @IsStorableText({ key: 1024 })
  glob?: string;

  @JSONSchema({ description: 'The column to sort by (ties by name); default name' })
  @IsOptional()
  @IsIn(STATE_SORTS, { message: `$property must be one of ${STATE_SORTS.join(', ')}` })
  sort?: (typeof STATE_SORTS)[number];

  @JSONSchema({ description: 'asc (default) or desc' })
  @IsOptional()
  @IsIn(['asc', 'desc'], { message: '$property must be asc or desc' })
  order?: 'asc' | 'desc';

  @JSONSchema({ description: 'Rows to skip; default 0' })
  @IsOptional()
  @QueryInteger()
  @IsInt(OFFSET)
  @Min(0, OFFSET)
  offset?: number;

  @JSONSchema({ description: 'Rows at most (1–500); without it, every matching state' })
  @IsOptional()
  @QueryInteger()
  @IsInt(LIMIT)
  @Min(1, LIMIT)
  @Max(500, LIMIT)
  limit?: number;
}

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

  @JSONSchema({
    description: 'false: no facets (GET /v1/dashboard/resource-facets answers them alone)',
  })
  @IsOptional()
  @QueryBoolean()
  @IsBoolean({ message: '$property must be true or false' })
  facets?: boolean;
}

/** `GET /v1/dashboard/dependencies?state=&address=` */
export class DashboardDependenciesQueryDto {
  @IsStateName()
  state!: string;

  @IsString()
  @MinLength(1)
  address!: string;
}
