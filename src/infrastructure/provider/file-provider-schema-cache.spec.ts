import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ProviderSchema } from '../../domain/cty/schema';
import { FileProviderSchemaCache, TieredProviderSchemaCache } from './file-provider-schema-cache';
import { InMemoryProviderSchemaCache } from './in-memory-provider-schema-cache';

const schema = {
  provider: { version: 0 },
  resourceSchemas: { x_thing: { version: 2 } },
} as unknown as ProviderSchema;

describe('provider schema caches on disk and in tiers', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-schema-cache-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('keeps a schema on disk per source and version', async () => {
    const cache = new FileProviderSchemaCache(dir);
    expect(await cache.get('registry.terraform.io/hashicorp/aws', '5.100.0')).toBeNull();
    await cache.put('registry.terraform.io/hashicorp/aws', '5.100.0', schema);
    expect(
      await new FileProviderSchemaCache(dir).get('registry.terraform.io/hashicorp/aws', '5.100.0'),
    ).toEqual(schema);
    expect(await cache.get('registry.terraform.io/hashicorp/aws', '5.99.0')).toBeNull();
    expect(
      fs.readdirSync(path.join(dir, 'provider-schemas/registry.terraform.io/hashicorp/aws')),
    ).toEqual(['5.100.0.json']);
  });

  it('treats an unreadable cache as a miss', async () => {
    const file = path.join(dir, 'provider-schemas/h/n/t/1.0.0.json');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, '{ truncated');
    expect(await new FileProviderSchemaCache(dir).get('h/n/t', '1.0.0')).toBeNull();
  });

  it('copies a hit from a later tier into the earlier ones', async () => {
    const near = new FileProviderSchemaCache(dir);
    const far = new InMemoryProviderSchemaCache();
    await far.put('h/n/t', '1.0.0', schema);
    const tiered = new TieredProviderSchemaCache([near, far]);
    expect(await tiered.get('h/n/t', '1.0.0')).toEqual(schema);
    expect(await near.get('h/n/t', '1.0.0')).toEqual(schema);
    await tiered.put('h/n/t', '2.0.0', schema);
    expect(await far.get('h/n/t', '2.0.0')).toEqual(schema);
  });
});
