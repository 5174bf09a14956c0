import { Matches } from 'class-validator';
import type { ProviderSchema } from '../../../domain/cty/schema';
import { IsJsonObject, IsStorableText, Verbatim } from '../request-validation';

/** Which cached schema: `?source=&version=`, and the key of a `PUT`. */
export class ProviderSchemaKeyDto {
  // The cache is keyed (and indexed) by source and version.
  @IsStorableText({ nonEmpty: true, key: 512 })
  source!: string;

  @Matches(/^[0-9A-Za-z][0-9A-Za-z.+-]{0,99}$/, {
    message: '$property must be an exact provider version',
  })
  version!: string;
}

/** `PUT /v1/provider-schemas`: a provider's GetProviderSchema answer, as JSON. */
export class PutProviderSchemaDto extends ProviderSchemaKeyDto {
  /** Stored as sent: the AWS provider's schema is megabytes. */
  @Verbatim()
  @IsJsonObject()
  schema!: ProviderSchema;
}
