import { createHash } from 'node:crypto';
import type { Decider } from '../shared/decider';
import { DomainError } from '../shared/domain-error';
import type { CommandContext, DomainEvent } from '../shared/event';
import { textProblem } from '../shared/storable-text';
import { formatScope, parseScope, TOKEN_INVALID } from './scopes';

export const TOKEN_EXISTS = 'TOKEN.EXISTS';
export const TOKEN_NOT_FOUND = 'TOKEN.NOT_FOUND';

/**
 * An API token: a name (the identity written on every event its bearer
 * causes), scopes, an optional expiry, and how it is presented: a secret,
 * of which only the SHA-256 is ever recorded, or a client certificate's
 * subject. A name is used once: a revoked token's name is never given to
 * another, so an actor in the log names one token for good.
 */
export const TokenEventType = {
  TokenCreated: 'TokenCreated',
  TokenRevoked: 'TokenRevoked',
} as const;

export const TOKEN_EVENT_TYPES: readonly string[] = Object.values(TokenEventType);

export interface TokenCreatedData {
  name: string;
  tokenId: string;
  /** The secret's first characters, for people to tell tokens apart; null for a certificate. */
  prefix: string | null;
  /** Hex SHA-256 of the secret; null for a certificate identity. */
  secretHash: string | null;
  /** The client certificate subject (`CN=ci, O=acme`) that presents this identity. */
  certSubject: string | null;
  scopes: string[];
  expiresAt: string | null;
}

export type TokenCreated = DomainEvent<'TokenCreated', TokenCreatedData>;
export type TokenRevoked = DomainEvent<'TokenRevoked', { name: string; tokenId: string }>;
export type TokenEvent = TokenCreated | TokenRevoked;

export type CreateToken = { type: 'CreateToken'; data: TokenCreatedData; metadata: CommandContext };
export type RevokeToken = { type: 'RevokeToken'; data: { name: string }; metadata: CommandContext };
export type TokenCommand = CreateToken | RevokeToken;

export type TokenState =
  | { status: 'none' }
  | { status: 'active'; tokenId: string }
  | { status: 'revoked'; tokenId: string };

const NAME = /^[A-Za-z0-9][A-Za-z0-9._@+=-]{0,99}$/;
const MAX_SUBJECT = 1000;

export function tokenStreamId(name: string): string {
  return `token-${name}`;
}

/** Token names are short identifiers: they become every event's actor. */
export function checkTokenName(name: string): string {
  if (!NAME.test(name)) {
    throw new DomainError(
      TOKEN_INVALID,
      `token name "${name.slice(0, 100)}" must be 1 to 100 letters, digits and . _ @ + = - (starting with a letter or digit)`,
    );
  }
  return name;
}

/**
 * The secret's digest. Secrets are 256 random bits, so a fast hash is as
 * hard to reverse as a slow one (nothing to guess) and lets every request
 * look its token up by index; see docs/security.md.
 */
export function tokenSecretHash(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

function create(command: CreateToken, state: TokenState): TokenEvent[] {
  const d = command.data;
  checkTokenName(d.name);
  if (state.status !== 'none') {
    throw new DomainError(
      TOKEN_EXISTS,
      state.status === 'active'
        ? `a token named "${d.name}" exists; revoke it first or choose another name`
        : `a token named "${d.name}" existed and was revoked; names are not reused, choose another`,
    );
  }
  if ((d.secretHash === null) === (d.certSubject === null)) {
    throw new DomainError(TOKEN_INVALID, 'a token has a secret or a certificate subject, not both');
  }
  if (d.certSubject !== null) {
    const problem = textProblem(d.certSubject);
    if (d.certSubject.trim() === '' || d.certSubject.length > MAX_SUBJECT || problem !== null) {
      throw new DomainError(
        TOKEN_INVALID,
        `certificate subject must be non-empty text of at most ${MAX_SUBJECT} characters, like CN=ci`,
      );
    }
  }
  if (d.scopes.length === 0) {
    throw new DomainError(TOKEN_INVALID, 'give the token at least one scope (--scope)');
  }
  const scopes = [...new Set(d.scopes.map((s) => formatScope(parseScope(s))))];
  if (d.expiresAt !== null && !(Date.parse(d.expiresAt) > Date.parse(command.metadata.now))) {
    throw new DomainError(TOKEN_INVALID, `expiry ${d.expiresAt} is not in the future`);
  }
  return [{ type: 'TokenCreated', data: { ...d, scopes } }];
}

function revoke(command: RevokeToken, state: TokenState): TokenEvent[] {
  if (state.status === 'none') {
    throw new DomainError(TOKEN_NOT_FOUND, `no token named "${command.data.name}"`);
  }
  // Revoking twice is not news.
  if (state.status === 'revoked') return [];
  return [{ type: 'TokenRevoked', data: { name: command.data.name, tokenId: state.tokenId } }];
}

export const tokenDecider: Decider<TokenCommand, TokenState, TokenEvent> = {
  decide(command, state) {
    switch (command.type) {
      case 'CreateToken':
        return create(command, state);
      case 'RevokeToken':
        return revoke(command, state);
      default: {
        const never: never = command;
        throw new Error(`unexpected ${JSON.stringify(never)}`);
      }
    }
  },
  evolve(state, event) {
    switch (event.type) {
      case 'TokenCreated':
        return { status: 'active', tokenId: event.data.tokenId };
      case 'TokenRevoked':
        return { status: 'revoked', tokenId: event.data.tokenId };
      default: {
        const never: never = event;
        throw new Error(`unexpected ${JSON.stringify(never)}`);
      }
    }
  },
  initialState: () => ({ status: 'none' }),
};

export const TOKEN_SNAPSHOT_SCHEMA = 'token/1';
