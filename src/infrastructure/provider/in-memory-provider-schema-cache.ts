import { ProviderSchemaCache } from '../../application/ports/provider-schema-cache.port';
import { ProviderSchema } from '../../domain/cty/schema';

export class InMemoryProviderSchemaCache implements ProviderSchemaCache {
  private readonly entries = new Map<string, ProviderSchema>();

  async get(source: string, version: string): Promise<ProviderSchema | null> {
    return this.entries.get(`${source}@${version}`) ?? null;
  }

  async put(source: string, version: string, schema: ProviderSchema): Promise<void> {
    this.entries.set(`${source}@${version}`, schema);
  }
}
