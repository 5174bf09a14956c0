import type { ProviderSchemaCache } from '../../application/ports/provider-schema-cache.port';
import type { ProviderBlockSchemas } from '../../application/refresh/refresh-read.port';
import type { ProviderSchema, SchemaBlock } from '../../domain/cty/schema';
import type { Database } from '../postgres/database';
import { compareSemver, parseSemver } from './semver';

/**
 * The `provider_schemas` table: shared by every replica and by every `kl`
 * that goes through the REST API, so GetSchema runs once per provider
 * version, not once per machine. Keys are normalised by the caller.
 */
export class PostgresProviderSchemaCache implements ProviderSchemaCache, ProviderBlockSchemas {
  constructor(private readonly db: Database) {}

  async get(source: string, version: string): Promise<ProviderSchema | null> {
    const text = await this.getText(source, version);
    return text === null ? null : (JSON.parse(text) as ProviderSchema);
  }

  /** The schema as stored, for serving without a parse and a re-serialisation of megabytes. */
  async getText(source: string, version: string): Promise<string | null> {
    const rows = await this.db.query<{ schema: string }>(
      'SELECT schema::text AS schema FROM provider_schemas WHERE source = $1 AND version = $2',
      [source, version],
    );
    return rows.length ? rows[0].schema : null;
  }

  async put(source: string, version: string, schema: ProviderSchema): Promise<void> {
    // kld's own fetch: a schema kept already serves as well.
    await this.putText(source, version, JSON.stringify(schema));
  }

  /**
   * Stores a provider version's schema once: a released version's schema
   * never changes, and every refresh of every user reads it, so a put never
   * replaces a stored one (a user with write on one state must not be able
   * to change what everyone's refresh decodes with). `same` when the stored
   * text is the one sent, `different` when another is kept.
   */
  async putText(
    source: string,
    version: string,
    schema: string,
  ): Promise<'stored' | 'same' | 'different'> {
    const rows = await this.db.query<{ outcome: 'stored' | 'same' | 'different' }>(
      `WITH put AS (
         INSERT INTO provider_schemas (source, version, schema, fetched_at)
         VALUES ($1, $2, $3::text::json, now())
         ON CONFLICT (source, version) DO NOTHING
         RETURNING 1)
       SELECT CASE WHEN EXISTS (SELECT 1 FROM put) THEN 'stored'
                   WHEN (SELECT schema::text FROM provider_schemas
                          WHERE source = $1 AND version = $2) = $3::text THEN 'same'
                   ELSE 'different' END AS outcome`,
      [source, version, schema],
    );
    return rows[0].outcome;
  }

  /** Only the provider block leaves the database: a whole AWS schema is megabytes. */
  async providerBlocks(source: string): Promise<{ version: string; block: SchemaBlock }[]> {
    const rows = await this.db.query<{ version: string; block: SchemaBlock | null }>(
      `SELECT version, schema->'provider'->'block' AS block FROM provider_schemas
        WHERE source = $1`,
      [source],
    );
    const newestFirst = (a: string, b: string): number => {
      const [x, y] = [parseSemver(a), parseSemver(b)];
      if (x && y) return compareSemver(y, x);
      return x ? -1 : y ? 1 : a < b ? 1 : -1;
    };
    return rows
      .filter((r): r is { version: string; block: SchemaBlock } => r.block !== null)
      .sort((a, b) => newestFirst(a.version, b.version));
  }
}
