import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  IsArray,
  IsBoolean,
  IsInt,
  IsOptional,
  IsUUID,
  Max,
  Min,
  ValidateNested,
} from 'class-validator';
import type { JsonObject } from '../../../domain/terraform';
import { IsJsonObject, IsStorableText, MAX_VERSION, Verbatim } from '../request-validation';

const MAX_CANDIDATES = 100_000;
const VERSION = { message: `$property must be an integer from 1 to ${MAX_VERSION}` };

/** `{type, module?}`: every resource of a type, anywhere or under a module. */
export class SelectorDto {
  @IsStorableText({ nonEmpty: true, key: true })
  type!: string;

  @IsOptional()
  @IsStorableText({ nonEmpty: true, key: true })
  module?: string;
}

/** What a client's local configuration names (ADR 0029 D3). */
export class CandidatesDto {
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(MAX_CANDIDATES)
  @IsStorableText({ nonEmpty: true, key: true }, { each: true })
  addresses?: string[];

  @IsOptional()
  @IsArray()
  @ArrayMaxSize(MAX_CANDIDATES)
  @IsStorableText({ nonEmpty: true, key: true }, { each: true })
  module_prefixes?: string[];

  @IsOptional()
  @IsArray()
  @ArrayMaxSize(MAX_CANDIDATES)
  @ValidateNested({ each: true })
  @Type(() => SelectorDto)
  selectors?: SelectorDto[];
}

/** `POST /v1/engine/states/<name>/scope`. */
export class ExpandScopeDto extends CandidatesDto {
  /** Answer with the slice of the same candidates too, when the scope is provably safe. */
  @IsOptional()
  @IsBoolean({ message: '$property must be true or false' })
  slice?: boolean;
}

/** `POST /v1/engine/states/<name>/slice`: the current version unless `version` is given. */
export class SliceDto extends CandidatesDto {
  @IsOptional()
  @IsInt(VERSION)
  @Min(1, VERSION)
  @Max(MAX_VERSION, VERSION)
  version?: number;
}

/** `POST /v1/engine/states/<name>/runs`: a state-engine write's reservations. */
export class StartEngineRunDto {
  /** The client's id for the run, so that a retried start is recognised. */
  @IsOptional()
  @IsUUID('all', { message: '$property must be a uuid' })
  run_id?: string;

  /** What the write is (`state rm`, `state mv`, `rollback resource`, `apply`). */
  @IsStorableText({ nonEmpty: true })
  operation!: string;

  @IsInt({ message: '$property must be a positive integer' })
  @Min(1, { message: '$property must be a positive integer' })
  base_version!: number;

  @IsArray()
  @ArrayMaxSize(MAX_CANDIDATES)
  @IsStorableText({ nonEmpty: true, key: true }, { each: true })
  write!: string[];

  @IsOptional()
  @IsArray()
  @ArrayMaxSize(MAX_CANDIDATES)
  @IsStorableText({ nonEmpty: true, key: true }, { each: true })
  read?: string[];

  @IsOptional()
  @IsInt({ message: '$property must be a positive integer' })
  @Min(1, { message: '$property must be a positive integer' })
  lease_seconds?: number;

  /** The addresses the write changes, checked against `base_version` (default: `write`). */
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(MAX_CANDIDATES)
  @IsStorableText({ nonEmpty: true, key: true }, { each: true })
  write_set?: string[];

  /** The addresses it read, checked likewise (default: `read`). */
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(MAX_CANDIDATES)
  @IsStorableText({ nonEmpty: true, key: true }, { each: true })
  read_set?: string[];

  /** What the operation does, recorded with the run (arguments, preview). */
  @IsOptional()
  @Verbatim()
  @IsJsonObject()
  info?: JsonObject;
}
