import { ProviderSchema } from '../../domain/cty/schema';

export const PROVIDER_SCHEMA_CACHE = Symbol('PROVIDER_SCHEMA_CACHE');

/**
 * Provider schemas keyed by normalised source address
 * (`registry.terraform.io/hashicorp/aws`) and exact version. A schema never
 * changes for a released version, so entries are never invalidated.
 */
export interface ProviderSchemaCache {
  get(source: string, version: string): Promise<ProviderSchema | null>;
  put(source: string, version: string, schema: ProviderSchema): Promise<void>;
}
