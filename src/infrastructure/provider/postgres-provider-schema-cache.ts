import type { ProviderSchemaCache } from '../../application/ports/provider-schema-cache.port';
import type { ProviderBlockSchemas } from '../../application/refresh/refresh-read.port';
import type { ProviderSchema, SchemaBlock } from '../../domain/cty/schema';
import type { Database } from '../postgres/database';
import { compareSemver, parseSemver } from './semver';

/** The writer of a schema every reader trusts: kld itself, an admin (migration 040). */
export const TRUSTED = '';

/**
 * The `provider_schemas` table: shared by every replica and by every `kl`
 * that goes through the REST API, so GetSchema runs once per provider
 * version, not once per machine. Keys are normalised by the caller.
 */
export class PostgresProviderSchemaCache implements ProviderSchemaCache, ProviderBlockSchemas {
  constructor(private readonly db: Database) {}

  /** kld's own lookups (its refreshes): only a schema everyone trusts. */
  async get(source: string, version: string): Promise<ProviderSchema | null> {
    const text = await this.getText(source, version, TRUSTED);
    return text === null ? null : (JSON.parse(text) as ProviderSchema);
  }

  /**
   * The schema as stored, for serving without a parse and a re-serialisation
   * of megabytes: the trusted one, else the one `reader` stored itself.
   */
  async getText(source: string, version: string, reader: string): Promise<string | null> {
    const rows = await this.db.query<{ schema: string }>(
      `SELECT schema::text AS schema FROM provider_schemas
        WHERE source = $1 AND version = $2 AND writer IN ('', $3)
        ORDER BY writer = '' DESC LIMIT 1`,
      [source, version, reader],
    );
    return rows.length ? rows[0].schema : null;
  }

  async put(source: string, version: string, schema: ProviderSchema): Promise<void> {
    // kld's own fetch (it ran the provider): a schema kept already serves as well.
    await this.putText(source, version, JSON.stringify(schema), TRUSTED);
  }

  /**
   * Stores a provider version's schema once per writer: a released
   * version's schema never changes, so a put never replaces a stored one.
   * `writer` is TRUSTED for kld itself and admins, whose schema every
   * refresh decodes with; any other writer's serves that writer alone, so a
   * token with write on one state cannot change what others decode with.
   * `same` when the stored text is the one sent, `different` when another is kept.
   */
  async putText(
    source: string,
    version: string,
    schema: string,
    writer: string,
  ): Promise<'stored' | 'same' | 'different'> {
    const rows = await this.db.query<{ outcome: 'stored' | 'same' | 'different' }>(
      `WITH put AS (
         INSERT INTO provider_schemas (source, version, writer, schema, fetched_at)
         VALUES ($1, $2, $4, $3::text::json, now())
         ON CONFLICT (source, version, writer) DO NOTHING
         RETURNING 1)
       SELECT CASE WHEN EXISTS (SELECT 1 FROM put) THEN 'stored'
                   WHEN (SELECT schema::text FROM provider_schemas
                          WHERE source = $1 AND version = $2 AND writer = $4) = $3::text THEN 'same'
                   ELSE 'different' END AS outcome`,
      [source, version, schema, writer],
    );
    return rows[0].outcome;
  }

  /**
   * Only the provider block leaves the database: a whole AWS schema is
   * megabytes. Trusted schemas only: they check configs every state's
   * refresh uses.
   */
  async providerBlocks(source: string): Promise<{ version: string; block: SchemaBlock }[]> {
    const rows = await this.db.query<{ version: string; block: SchemaBlock | null }>(
      `SELECT version, schema->'provider'->'block' AS block FROM provider_schemas
        WHERE source = $1 AND writer = ''`,
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
