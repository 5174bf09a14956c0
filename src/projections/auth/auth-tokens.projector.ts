import { TOKEN_EVENT_TYPES, TokenEvent } from '../../domain/auth';
import type { RecordedEvent } from '../../domain/shared/event';
import type { Queryable } from '../../infrastructure/postgres/database';
import { textParam } from '../../infrastructure/postgres/jsonb-text';
import { Projector } from '../projector';

/**
 * `auth_tokens`: one row per token name, which every request's
 * authentication reads. A revocation is effective on every replica once its
 * row is written: nothing caches a token.
 */
@Projector()
export class AuthTokensProjector implements Projector {
  readonly name = 'auth-tokens';
  readonly handles = TOKEN_EVENT_TYPES;
  readonly tables = ['auth_tokens'];

  async apply(events: RecordedEvent[], tx: Queryable): Promise<void> {
    for (const recorded of events) {
      if (!TOKEN_EVENT_TYPES.includes(recorded.type)) continue;
      const event = recorded as unknown as TokenEvent;
      const { occurredAt, actor } = recorded.metadata;
      switch (event.type) {
        case 'TokenCreated': {
          const d = event.data;
          await tx.query(
            `INSERT INTO auth_tokens (name, token_id, prefix, secret_hash, cert_subject, scopes,
               expires_at, created_at, created_by)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (name) DO NOTHING`,
            [
              d.name,
              d.tokenId,
              d.prefix,
              d.secretHash,
              d.certSubject === null ? null : textParam(d.certSubject),
              d.scopes,
              d.expiresAt,
              occurredAt,
              textParam(actor),
            ],
          );
          break;
        }
        case 'TokenRevoked':
          await tx.query(
            `UPDATE auth_tokens SET revoked_at = $2, revoked_by = $3
              WHERE name = $1 AND revoked_at IS NULL`,
            [event.data.name, occurredAt, textParam(actor)],
          );
          break;
        default:
          break;
      }
    }
  }
}

export const AUTH_PROJECTORS = [AuthTokensProjector] as const;
