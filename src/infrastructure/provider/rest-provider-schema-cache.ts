import { ProviderSchemaCache } from '../../application/ports/provider-schema-cache.port';
import { ProviderSchema } from '../../domain/cty/schema';
import type { ProviderSchemaKeyDto, PutProviderSchemaDto } from '../http/dto/provider-schema.dto';
import { KldHttpClient } from '../rest/kld-http-client';

/**
 * kld's persistent schema cache (`/v1/provider-schemas`). A cache is an
 * optimisation: a miss, an unreachable server or a refused write only costs
 * one GetSchema call, so none of them ever fails the caller.
 */
export class RestProviderSchemaCache implements ProviderSchemaCache {
  constructor(
    private readonly http: KldHttpClient,
    private readonly onError: (message: string) => void = () => undefined,
  ) {}

  async get(source: string, version: string): Promise<ProviderSchema | null> {
    try {
      const res = await this.http.send('GET', '/v1/provider-schemas', {
        query: { source, version } satisfies ProviderSchemaKeyDto,
      });
      if (!res.ok) {
        if (res.status !== 404) this.onError(`schema cache lookup answered ${res.status}`);
        res.discard();
        return null;
      }
      const body = (await res.json()) as { schema?: ProviderSchema };
      return body.schema ?? null;
    } catch (e) {
      this.onError(`schema cache lookup failed: ${(e as Error).message}`);
      return null;
    }
  }

  async put(source: string, version: string, schema: ProviderSchema): Promise<void> {
    try {
      const res = await this.http.send('PUT', '/v1/provider-schemas', {
        json: { source, version, schema } satisfies PutProviderSchemaDto,
      });
      if (!res.ok) this.onError(`schema cache store answered ${res.status}`);
      res.discard();
    } catch (e) {
      this.onError(`schema cache store failed: ${(e as Error).message}`);
    }
  }
}
