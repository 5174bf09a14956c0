import { Type } from 'class-transformer';
import {
  IsArray,
  IsBoolean,
  IsIn,
  IsInt,
  IsOptional,
  IsString,
  Max,
  MaxLength,
  Min,
  MinLength,
  ValidateIf,
  ValidateNested,
} from 'class-validator';
import {
  changedPathsProblem,
  MAX_RESULT_ERROR_CHARS,
  REFRESH_OUTCOMES,
  REFRESH_RUN_STATUSES,
  RefreshOutcome,
  RefreshRunStatus,
} from '../../../domain/refresh';
import type { JsonValue } from '../../../domain/terraform';
import { IsStateName, IsStorableText, QueryInteger, rule, Verbatim } from '../request-validation';

/** `POST /v1/refresh-runs`: start a run (`kl refresh`). */
export class StartRefreshRunDto {
  @IsStateName()
  state!: string;

  @IsOptional()
  @IsBoolean()
  dry_run?: boolean;

  /** Recorded as the run's actor instead of the caller's name. */
  @IsOptional()
  @MinLength(1)
  @MaxLength(200)
  @IsStorableText()
  actor?: string;

  @IsOptional()
  @IsString()
  lock_id?: string;
}

/** One instance's outcome in `POST /v1/refresh-runs/<id>/results`. */
export class RefreshResultDto {
  @IsStorableText({ nonEmpty: true, key: true })
  address!: string;

  @IsStorableText({ nonEmpty: true })
  provider!: string;

  @IsIn(REFRESH_OUTCOMES)
  outcome!: RefreshOutcome;

  @IsStorableText({ nonEmpty: true })
  before_hash!: string;

  /** null when the instance is gone or failed. */
  @ValidateIf((_, value) => value !== null)
  @IsStorableText()
  after_hash!: string | null;

  // Kept exactly (NUL-safe where projected); bounded where no provider goes (result-bounds.ts).
  @IsOptional()
  @IsArray()
  @IsString({ each: true })
  @rule('changedPathsBounded', (v) =>
    Array.isArray(v) && v.every((p) => typeof p === 'string') ? changedPathsProblem(v) : null,
  )
  changed_paths?: string[];

  @IsOptional()
  @IsString()
  @MaxLength(MAX_RESULT_ERROR_CHARS, {
    message: `$property is longer than ${MAX_RESULT_ERROR_CHARS} characters`,
  })
  error?: string;
}

export class RefreshResultsDto {
  @IsArray()
  @ValidateNested({ each: true })
  @Type(() => RefreshResultDto)
  results!: RefreshResultDto[];
}

/** `POST /v1/refresh-runs/<id>/finish`: finish, and commit the refreshed document if given. */
export class FinishRefreshRunDto {
  @IsIn(REFRESH_RUN_STATUSES)
  status!: RefreshRunStatus;

  @IsOptional()
  @IsString()
  @MaxLength(MAX_RESULT_ERROR_CHARS, {
    message: `$property is longer than ${MAX_RESULT_ERROR_CHARS} characters`,
  })
  error_summary?: string | null;

  /** The refreshed state document, checked as terraform's POST checks one. */
  @IsOptional()
  @Verbatim()
  document?: JsonValue | null;

  @IsOptional()
  @IsString()
  lock_id?: string | null;
}

/** `POST /v1/states/<name>/refresh`: a refresh run on the kld host. */
export class StateRefreshDto {
  @IsOptional()
  @IsBoolean()
  dry_run?: boolean;
}

/** `GET /v1/refresh-runs?state=&limit=` */
export class RefreshRunsQueryDto {
  @IsOptional()
  @IsStateName()
  state?: string;

  @IsOptional()
  @QueryInteger()
  @IsInt({ message: '$property must be an integer from 1 to 1000' })
  @Min(1, { message: '$property must be an integer from 1 to 1000' })
  @Max(1000, { message: '$property must be an integer from 1 to 1000' })
  limit?: number;
}

/** `GET /v1/drift?state=` */
export class DriftQueryDto {
  @IsStateName()
  state!: string;
}
