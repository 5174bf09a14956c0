import { deciderSpec } from '../../../test/support/decider-spec';
import type { CommandContext } from '../shared/event';
import {
  TOKEN_EXISTS,
  TOKEN_NOT_FOUND,
  TokenCommand,
  TokenCreatedData,
  tokenDecider,
  TokenEvent,
  tokenSecretHash,
} from './token';
import { TOKEN_INVALID } from './scopes';

const ctx: CommandContext = { actor: 'admin', correlationId: 'c', now: '2026-11-30T00:00:00.000Z' };
const data = (over: Partial<TokenCreatedData> = {}): TokenCreatedData => ({
  name: 'ci',
  tokenId: 't1',
  prefix: 'kl_abcdefgh',
  secretHash: tokenSecretHash('kl_secret'),
  certSubject: null,
  scopes: ['write:team-a/*'],
  expiresAt: null,
  ...over,
});
const create = (over: Partial<TokenCreatedData> = {}): TokenCommand => ({
  type: 'CreateToken',
  data: data(over),
  metadata: ctx,
});
const revoke = (name = 'ci'): TokenCommand => ({
  type: 'RevokeToken',
  data: { name },
  metadata: ctx,
});
const created = (over: Partial<TokenCreatedData> = {}): TokenEvent => ({
  type: 'TokenCreated',
  data: data(over),
});

const { given } = deciderSpec(tokenDecider);

describe('token decider', () => {
  it('records the hash, never a secret, with normalised scopes', () => {
    const events = given()
      .when(create({ scopes: [' write:team-a/* ', 'query', 'query'] }))
      .events();
    expect(events).toEqual([created({ scopes: ['write:team-a/*', 'query'] })]);
    expect(JSON.stringify(events)).not.toContain('kl_secret');
  });

  it('refuses a name in use, and a revoked name', () => {
    given(created()).when(create()).thenFails(TOKEN_EXISTS);
    given(created(), { type: 'TokenRevoked', data: { name: 'ci', tokenId: 't1' } })
      .when(create({ tokenId: 't2' }))
      .thenFails(TOKEN_EXISTS);
  });

  it('refuses bad scopes, names, no scope, both or neither credential, past expiry', () => {
    given()
      .when(create({ scopes: ['root'] }))
      .thenFails(TOKEN_INVALID);
    given()
      .when(create({ scopes: ['read:'] }))
      .thenFails(TOKEN_INVALID);
    given()
      .when(create({ scopes: [] }))
      .thenFails(TOKEN_INVALID);
    given()
      .when(create({ name: 'a b' }))
      .thenFails(TOKEN_INVALID);
    given()
      .when(create({ certSubject: 'CN=ci' }))
      .thenFails(TOKEN_INVALID);
    given()
      .when(create({ secretHash: null, prefix: null, certSubject: null }))
      .thenFails(TOKEN_INVALID);
    given()
      .when(create({ expiresAt: '2026-11-29T00:00:00.000Z' }))
      .thenFails(TOKEN_INVALID);
  });

  it('accepts a certificate identity', () => {
    given()
      .when(create({ secretHash: null, prefix: null, certSubject: 'CN=ci' }))
      .then([created({ secretHash: null, prefix: null, certSubject: 'CN=ci' })]);
  });

  it('revokes once; again is no news; an unknown token is not found', () => {
    given(created())
      .when(revoke())
      .then([{ type: 'TokenRevoked', data: { name: 'ci', tokenId: 't1' } }]);
    given(created(), { type: 'TokenRevoked', data: { name: 'ci', tokenId: 't1' } })
      .when(revoke())
      .then([]);
    given().when(revoke('nope')).thenFails(TOKEN_NOT_FOUND);
  });
});
