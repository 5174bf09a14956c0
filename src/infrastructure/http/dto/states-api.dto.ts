import { IsBoolean, IsInt, IsOptional, IsString, Max, MinLength } from 'class-validator';
import { MAX_VERSION, QueryBoolean, QueryInteger } from '../request-validation';

const NON_NEGATIVE = { message: '$property must be a non-negative integer' };
const VERSION = { message: `$property must be an integer from 0 to ${MAX_VERSION}` };

/**
 * The query parameters of `GET /v1/api/states/<name>/…`: `resources` takes
 * `address_glob` and `version`, `resources/<address>` `history` and
 * `version`, `diff` `from`/`to` (serials) or `from_version`/`to_version`.
 */
export class StatesApiQueryDto {
  @IsOptional()
  @IsString()
  address_glob?: string;

  @IsOptional()
  @QueryInteger()
  @IsInt(VERSION)
  @Max(MAX_VERSION, VERSION)
  version?: number;

  @IsOptional()
  @QueryBoolean()
  @IsBoolean({ message: '$property must be true or false' })
  history?: boolean;

  @IsOptional()
  @QueryInteger()
  @IsInt(NON_NEGATIVE)
  from?: number;

  @IsOptional()
  @QueryInteger()
  @IsInt(NON_NEGATIVE)
  to?: number;

  @IsOptional()
  @QueryInteger()
  @IsInt(VERSION)
  @Max(MAX_VERSION, VERSION)
  from_version?: number;

  @IsOptional()
  @QueryInteger()
  @IsInt(VERSION)
  @Max(MAX_VERSION, VERSION)
  to_version?: number;
}

/** `POST /v1/api/states/<name>/import?lock_id=&force=` */
export class ImportQueryDto {
  @IsOptional()
  @IsString()
  lock_id?: string;

  @IsOptional()
  @QueryBoolean()
  @IsBoolean({ message: '$property must be true or false' })
  force?: boolean;
}

/** `POST /v1/api/states/<name>/force-unlock`: empty, or only this lock. */
export class ForceUnlockDto {
  @IsOptional()
  @IsString()
  @MinLength(1)
  lock_id?: string;
}
