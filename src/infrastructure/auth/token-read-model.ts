import type { Database } from '../postgres/database';

/** A token as authentication needs it. */
export interface TokenRecord {
  name: string;
  tokenId: string;
  scopes: string[];
  expiresAt: Date | null;
  revokedAt: Date | null;
}

/** A token as `kl token list` shows it: never its hash. */
export interface TokenSummary {
  name: string;
  prefix: string | null;
  cert_subject: string | null;
  scopes: string[];
  created_at: string;
  created_by: string;
  expires_at: string | null;
  last_used_at: string | null;
  revoked_at: string | null;
}

const RECORD = `name, token_id AS "tokenId", scopes, expires_at AS "expiresAt", revoked_at AS "revokedAt"`;

/** `auth_tokens`, read fresh on every request (no cache: revocation is at once). */
export class TokenReadModel {
  constructor(private readonly db: Database) {}

  // Every authenticated request runs one of these two: prepared, planned once per connection.
  async bySecretHash(hash: string): Promise<TokenRecord | null> {
    const rows = await this.db.prepared<TokenRecord>(
      `SELECT ${RECORD} FROM auth_tokens WHERE secret_hash = $1`,
      [hash],
    );
    return rows[0] ?? null;
  }

  async byCertSubject(subject: string): Promise<TokenRecord | null> {
    const rows = await this.db.prepared<TokenRecord>(
      `SELECT ${RECORD} FROM auth_tokens WHERE cert_subject = $1 AND revoked_at IS NULL`,
      [subject],
    );
    return rows[0] ?? null;
  }

  async list(includeRevoked: boolean): Promise<TokenSummary[]> {
    return this.db.query<TokenSummary>(
      `SELECT t.name, t.prefix, t.cert_subject, t.scopes,
              to_json(t.created_at)#>>'{}' AS created_at, t.created_by,
              to_json(t.expires_at)#>>'{}' AS expires_at,
              to_json(u.last_used_at)#>>'{}' AS last_used_at,
              to_json(t.revoked_at)#>>'{}' AS revoked_at
         FROM auth_tokens t LEFT JOIN auth_token_usage u ON u.token_id = t.token_id
        WHERE $1 OR t.revoked_at IS NULL
        ORDER BY t.created_at, t.name`,
      [includeRevoked],
    );
  }

  /** Tokens (or certificate identities) that can still be used. */
  async usableCount(now: Date): Promise<number> {
    const rows = await this.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM auth_tokens
        WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $1)`,
      [now],
    );
    return rows[0].n;
  }

  async touch(tokenId: string, at: Date): Promise<void> {
    await this.db.query(
      `INSERT INTO auth_token_usage (token_id, last_used_at) VALUES ($1, $2)
       ON CONFLICT (token_id) DO UPDATE SET last_used_at = GREATEST(auth_token_usage.last_used_at, EXCLUDED.last_used_at)`,
      [tokenId, at],
    );
  }
}
