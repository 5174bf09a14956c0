import { IsBoolean, IsOptional } from 'class-validator';
import type { JsonObject } from '../../../domain/terraform';
import { IsJsonObject, IsStateName, IsStorableText, Verbatim } from '../request-validation';

/** `PUT /v1/provider-configs`: a state's config of one provider (and alias). */
export class PutProviderConfigDto {
  @IsStateName()
  state!: string;

  @IsStorableText({ nonEmpty: true })
  source!: string;

  /** Absent or empty: the default (unaliased) configuration. */
  @IsOptional()
  @IsStorableText()
  alias?: string | null;

  /** Stored exactly as given; secrets as `{"env": "NAME"}`. */
  @Verbatim()
  @IsJsonObject()
  config!: JsonObject;

  @IsOptional()
  @IsBoolean()
  skip_schema_check?: boolean;
}

/** `?state=&source=&alias=` of the provider-config reads and `DELETE`. */
export class ProviderConfigQueryDto {
  @IsStateName()
  state!: string;

  @IsOptional()
  @IsStorableText({ nonEmpty: true })
  source?: string;

  @IsOptional()
  @IsStorableText()
  alias?: string;
}
