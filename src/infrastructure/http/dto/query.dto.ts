import { ArrayMaxSize, IsArray, IsInt, IsOptional, Max, Min } from 'class-validator';
import type { JsonValue } from '../../../domain/terraform';
import { QUERY_LIMITS } from '../../query/query-limits';
import { IsStorableText, Verbatim } from '../request-validation';

/** `POST /v1/query` (`kl query`): read-only SQL over the read models. */
export class QueryDto {
  // PostgreSQL takes neither NUL nor unpaired surrogates in query text.
  @IsStorableText({ nonEmpty: true })
  sql!: string;

  /** `$1`, `$2`…; objects and arrays are sent to PostgreSQL as JSON text. */
  @IsOptional()
  @Verbatim()
  @IsArray()
  @ArrayMaxSize(QUERY_LIMITS.maxParams)
  params?: JsonValue[];

  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(QUERY_LIMITS.maxMaxRows)
  max_rows?: number;

  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(QUERY_LIMITS.maxTimeoutMs)
  timeout_ms?: number;
}
