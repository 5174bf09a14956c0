import type { Request } from 'express';
import type { TLSSocket } from 'node:tls';
import { Grants, parseScope, tokenSecretHash } from '../../domain/auth';
import { DomainError } from '../../domain/shared/domain-error';
import type { Logger } from '../logging/logger';
import { AUTH_UNAUTHENTICATED, Principal } from '../http/access';
import type { TokenReadModel, TokenRecord } from './token-read-model';

const HOW =
  'send a token as "Authorization: Bearer <token>" or as the basic-auth password (terraform: TF_HTTP_PASSWORD; kl: KL_TOKEN)';
const TOUCH_EVERY_MS = 60_000;
const MAX_USERNAME = 100;

/** The Authenticator, or null when authentication is off (AuthenticationModule). */
export const AUTHENTICATOR = Symbol('Authenticator');

/** The principal of a request when authentication is off: everything allowed. */
export const OPEN: Principal = { name: null, username: null, grants: Grants.all() };

/**
 * Who sent a request: a token (Bearer, or the password of basic auth, whose
 * username is kept as a detail) or, with none, a client certificate whose
 * subject names an identity. Nothing is cached, so a revoked token is
 * refused by every replica from the moment its revocation is projected.
 */
export class Authenticator {
  private readonly touched = new Map<string, number>();

  constructor(
    private readonly tokens: TokenReadModel,
    private readonly logger: Logger,
    private readonly now: () => Date,
  ) {}

  async authenticate(req: Request): Promise<Principal> {
    return this.authenticateWith(req.header('authorization'), () => certificateSubject(req));
  }

  /**
   * The same for any transport: the Authorization header's value (gRPC:
   * the `authorization` metadata) and the verified client certificate's
   * subject, if any.
   */
  async authenticateWith(
    authorization: string | undefined,
    certSubject: () => string | null,
  ): Promise<Principal> {
    const sent = authorization === undefined ? null : credentials(authorization);
    if (sent?.secret) {
      const record = await this.tokens.bySecretHash(tokenSecretHash(sent.secret));
      if (record === null) throw unauthenticated(`the token is not valid; ${HOW}`);
      return this.principal(record, sent.username);
    }
    // No token (terraform with only a username sends an empty password):
    // a verified client certificate may name the identity.
    const subject = certSubject();
    if (subject !== null) {
      const record = await this.tokens.byCertSubject(subject);
      if (record === null) {
        throw unauthenticated(
          `no identity is registered for client certificate "${subject.slice(0, 200)}"; ${HOW}`,
        );
      }
      return this.principal(record, sent?.username ?? null);
    }
    throw unauthenticated(
      sent === null
        ? `authentication required: ${HOW}`
        : `the basic-auth password is empty: it must be the token; ${HOW}`,
    );
  }

  private principal(record: TokenRecord, username: string | null): Principal {
    const now = this.now();
    if (record.revokedAt !== null) {
      throw unauthenticated(`token "${record.name}" was revoked; ask an admin for a new one`);
    }
    if (record.expiresAt !== null && record.expiresAt <= now) {
      throw unauthenticated(
        `token "${record.name}" expired at ${record.expiresAt.toISOString()}; ask an admin for a new one`,
      );
    }
    this.touch(record.tokenId, now);
    return { name: record.name, username, grants: Grants.of(record.scopes.map(parseScope)) };
  }

  /** Last use, written at most once a minute per token and never in the request's way. */
  private touch(tokenId: string, now: Date): void {
    const last = this.touched.get(tokenId);
    if (last !== undefined && now.getTime() - last < TOUCH_EVERY_MS) return;
    this.touched.set(tokenId, now.getTime());
    if (this.touched.size > 10_000) this.touched.clear();
    this.tokens.touch(tokenId, now).catch((err: unknown) => {
      this.logger.warn({ err }, 'could not record when a token was last used');
    });
  }
}

function unauthenticated(message: string): DomainError {
  return new DomainError(AUTH_UNAUTHENTICATED, message);
}

/** `Bearer <token>` or `Basic base64(username:token)`; the secret may be empty. */
function credentials(header: string): { secret: string; username: string | null } {
  const m = /^(\S+)\s+(\S+)\s*$/.exec(header);
  const scheme = m?.[1].toLowerCase();
  if (m && scheme === 'bearer') return { secret: m[2], username: null };
  if (m && scheme === 'basic') {
    const decoded = Buffer.from(m[2], 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    const secret = colon < 0 ? '' : decoded.slice(colon + 1);
    const username = (colon < 0 ? decoded : decoded.slice(0, colon)).slice(0, MAX_USERNAME);
    return { secret, username: username === '' ? null : username };
  }
  throw unauthenticated(`the Authorization header must be Bearer or Basic; ${HOW}`);
}

/** The verified client certificate's subject (`CN=ci, O=acme`), or null. */
export function certificateSubject(req: Request): string | null {
  const socket = req.socket as Partial<TLSSocket>;
  if (!socket.encrypted || !socket.authorized || !socket.getPeerX509Certificate) return null;
  const cert = socket.getPeerX509Certificate();
  return cert ? subjectText(cert.subject) : null;
}

/** Node prints a subject one attribute a line; identities name it on one line. */
export function subjectText(subject: string): string {
  return subject
    .split('\n')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .join(', ');
}
