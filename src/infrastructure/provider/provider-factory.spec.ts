import { CtyJson } from '../../domain/cty/cty-type';
import { ProviderSchema } from '../../domain/cty/schema';
import { DiscoveredProvider } from './discovery';
import { InMemoryProviderSchemaCache } from './in-memory-provider-schema-cache';
import { ProviderClient } from './provider-client';
import { CachedSchemaProviderFactory } from './provider-factory';

function schema(version: number): ProviderSchema {
  return {
    protocolVersion: 5,
    provider: {
      version: 0,
      block: { attributes: [{ name: 'region', type: 'string', optional: true }], blockTypes: [] },
    },
    resourceSchemas: {
      thing: { version, block: { attributes: [{ name: 'id', type: 'string' }], blockTypes: [] } },
    },
    dataSourceSchemas: {},
    serverCapabilities: {
      planDestroy: false,
      getProviderSchemaOptional: true,
      moveResourceState: false,
    },
  };
}

class FakeClient implements Partial<ProviderClient> {
  schemaCalls = 0;
  used: ProviderSchema | null = null;
  closed = false;
  constructor(private readonly served: ProviderSchema) {}
  async getSchema(): Promise<ProviderSchema> {
    this.schemaCalls++;
    return this.served;
  }
  useSchema(s: ProviderSchema): void {
    this.used = s;
  }
  async configure(_config: CtyJson): Promise<never[]> {
    return [];
  }
  async close(): Promise<void> {
    this.closed = true;
  }
}

describe('cached-schema provider factory', () => {
  const discovered = (version: string): DiscoveredProvider => ({
    source: 'registry.terraform.io/hashicorp/thing',
    version,
    binary: `/fake/${version}/terraform-provider-thing`,
    searchPath: '/fake',
    versionFrom: 'highest',
  });

  it('asks the provider for its schema once per (source, version)', async () => {
    const cache = new InMemoryProviderSchemaCache();
    const launched: FakeClient[] = [];
    let version = '1.0.0';
    const factory = new CachedSchemaProviderFactory(
      cache,
      {},
      async (binary) => {
        const c = new FakeClient(schema(binary.includes('2.0.0') ? 2 : 1));
        launched.push(c);
        return c as unknown as ProviderClient;
      },
      () => discovered(version),
    );

    const first = await factory.open('thing');
    const second = await factory.open('hashicorp/thing');
    expect([first.schemaFromCache, second.schemaFromCache]).toEqual([false, true]);
    expect(launched.map((c) => c.schemaCalls)).toEqual([1, 0]);
    expect(launched[1].used).toEqual(first.schema);
    expect(await cache.get('registry.terraform.io/hashicorp/thing', '1.0.0')).toEqual(schema(1));

    version = '2.0.0';
    const third = await factory.open('thing');
    expect(third.schemaFromCache).toBe(false);
    expect(third.schema.resourceSchemas.thing.version).toBe(2);
  });

  it('closes the plugin when the schema cannot be had', async () => {
    const client = new FakeClient(schema(1));
    client.getSchema = async () => {
      throw new Error('boom');
    };
    const factory = new CachedSchemaProviderFactory(
      new InMemoryProviderSchemaCache(),
      {},
      async () => client as unknown as ProviderClient,
      () => discovered('1.0.0'),
    );
    await expect(factory.open('thing')).rejects.toThrow('boom');
    expect(client.closed).toBe(true);
  });
});
