import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { ProviderSchemaCache } from '../../application/ports/provider-schema-cache.port';
import { ProviderSchema } from '../../domain/cty/schema';

/**
 * Schemas on this machine's disk (`$KL_CACHE_DIR`, else
 * `$XDG_CACHE_HOME/kilolock`, else `~/.cache/kilolock`). The AWS schema is
 * ~11 MB of JSON: reading it locally is much cheaper than fetching it from
 * kld on every run. Like every cache here, a failure is only a miss.
 */
export class FileProviderSchemaCache implements ProviderSchemaCache {
  constructor(private readonly dir: string = defaultCacheDir()) {}

  async get(source: string, version: string): Promise<ProviderSchema | null> {
    try {
      return JSON.parse(await fs.readFile(this.file(source, version), 'utf8')) as ProviderSchema;
    } catch {
      return null;
    }
  }

  async put(source: string, version: string, schema: ProviderSchema): Promise<void> {
    const file = this.file(source, version);
    // Write then rename, so a concurrent reader never sees half a file.
    const tmp = `${file}.${process.pid}.tmp`;
    try {
      await fs.mkdir(path.dirname(file), { recursive: true });
      await fs.writeFile(tmp, JSON.stringify(schema));
      await fs.rename(tmp, file);
    } catch {
      await fs.rm(tmp, { force: true }).catch(() => undefined);
    }
  }

  private file(source: string, version: string): string {
    const safe = (s: string) => s.replace(/[^A-Za-z0-9._-]/g, '_');
    return path.join(
      this.dir,
      'provider-schemas',
      ...source.split('/').map(safe),
      `${safe(version)}.json`,
    );
  }
}

export function defaultCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.KL_CACHE_DIR) return env.KL_CACHE_DIR;
  if (env.XDG_CACHE_HOME) return path.join(env.XDG_CACHE_HOME, 'kilolock');
  return path.join(os.homedir(), '.cache', 'kilolock');
}

/**
 * Looks in each cache in turn; a hit in a later one is copied into the
 * earlier ones, and a fresh schema is stored in all of them.
 */
export class TieredProviderSchemaCache implements ProviderSchemaCache {
  constructor(private readonly tiers: readonly ProviderSchemaCache[]) {}

  async get(source: string, version: string): Promise<ProviderSchema | null> {
    for (let i = 0; i < this.tiers.length; i++) {
      const schema = await this.tiers[i].get(source, version);
      if (schema) {
        await Promise.all(this.tiers.slice(0, i).map((t) => t.put(source, version, schema)));
        return schema;
      }
    }
    return null;
  }

  async put(source: string, version: string, schema: ProviderSchema): Promise<void> {
    await Promise.all(this.tiers.map((t) => t.put(source, version, schema)));
  }
}
