import { ProviderSchemaCache } from '../../application/ports/provider-schema-cache.port';
import { ProviderSchema } from '../../domain/cty/schema';
import { clientCertificate } from './client-certificate';
import { DiscoveredProvider, discoverProvider, DiscoveryOptions } from './discovery';
import { launchProvider, LaunchProviderOptions } from './grpc-provider-client';
import { ProviderClient } from './provider-client';

export interface OpenedProvider {
  client: ProviderClient;
  schema: ProviderSchema;
  provider: DiscoveredProvider;
  schemaFromCache: boolean;
}

export type Launcher = (binary: string, options: LaunchProviderOptions) => Promise<ProviderClient>;
export type Discoverer = (source: string, options: DiscoveryOptions) => DiscoveredProvider;

/**
 * Discover → launch → schema. GetSchema is asked once per (source, version)
 * and then served from the cache: it is the most expensive call a big
 * provider answers, and providers declare it optional.
 */
export class CachedSchemaProviderFactory {
  constructor(
    private readonly cache: ProviderSchemaCache,
    private readonly launchOptions: LaunchProviderOptions = {},
    private readonly launch: Launcher = launchProvider,
    private readonly discover: Discoverer = discoverProvider,
  ) {}

  /**
   * Generates the plugin client certificate (one per process) ahead of the
   * first launch. A failure is dropped here: the launch makes it again and reports it.
   */
  warmUp(): void {
    clientCertificate().catch(() => undefined);
  }

  /** The schema alone: from the cache when it has it, else from a short-lived plugin. */
  async schema(
    source: string,
    discovery: DiscoveryOptions = {},
  ): Promise<{ schema: ProviderSchema; provider: DiscoveredProvider; schemaFromCache: boolean }> {
    const provider = this.discover(source, discovery);
    const cached = await this.cache.get(provider.source, provider.version);
    if (cached) return { schema: cached, provider, schemaFromCache: true };
    const client = await this.launch(provider.binary, this.launchOptions);
    try {
      const schema = await client.getSchema();
      await this.cache.put(provider.source, provider.version, schema);
      return { schema, provider, schemaFromCache: false };
    } finally {
      await client.close();
    }
  }

  async open(source: string, discovery: DiscoveryOptions = {}): Promise<OpenedProvider> {
    const provider = this.discover(source, discovery);
    const client = await this.launch(provider.binary, this.launchOptions);
    try {
      const cached = await this.cache.get(provider.source, provider.version);
      if (cached) {
        client.useSchema(cached);
        return { client, schema: cached, provider, schemaFromCache: true };
      }
      const schema = await client.getSchema();
      await this.cache.put(provider.source, provider.version, schema);
      return { client, schema, provider, schemaFromCache: false };
    } catch (e) {
      await client.close();
      throw e;
    }
  }
}
