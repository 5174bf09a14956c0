import { IsArray, IsBoolean, IsISO8601, IsOptional, IsString } from 'class-validator';
import { IsStorableText, QueryBoolean } from '../request-validation';

/** `POST /v1/admin/tokens`; names and scopes are checked by the token decider. */
export class CreateTokenDto {
  @IsString()
  name!: string;

  /** `read:GLOB`, `write:GLOB`, `admin`, `query`, `events`. */
  @IsArray()
  @IsString({ each: true })
  scopes!: string[];

  @IsOptional()
  @IsISO8601({ strict: true }, { message: '$property must be an ISO date-time' })
  expires_at?: string;

  /** A client certificate subject (`CN=ci, O=acme`) instead of a secret. */
  @IsOptional()
  @IsStorableText({ nonEmpty: true })
  cert_subject?: string;
}

/** `GET /v1/admin/tokens?all=true` lists revoked tokens too. */
export class TokensQueryDto {
  @IsOptional()
  @QueryBoolean()
  @IsBoolean({ message: '$property must be true or false' })
  all?: boolean;
}
