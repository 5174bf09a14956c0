import { DomainError } from '../shared/domain-error';
import { CommandContext } from '../shared/event';
import { JsonObject } from '../terraform/json-value';
import { deciderSpec } from '../../../test/support/decider-spec';
import {
  decideProviderConfigs,
  initialProviderConfigs,
  ProviderConfigCommand,
  ProviderConfigEvent,
  providerConfigHistory,
  providerConfigsDecider,
  providerConfigsFromSnapshot,
  providerConfigsToSnapshot,
} from './provider-configs';

const ctx: CommandContext = { actor: 'ops', correlationId: 'c', now: '2026-11-30T00:00:00.000Z' };
const AWS = 'registry.terraform.io/hashicorp/aws';

const configure = (config: JsonObject, alias: string | null = null): ProviderConfigCommand => ({
  type: 'ConfigureProvider',
  data: { state: 'prod', source: AWS, alias, config },
  metadata: ctx,
});
const remove = (alias: string | null = null): ProviderConfigCommand => ({
  type: 'RemoveProviderConfig',
  data: { state: 'prod', source: AWS, alias },
  metadata: ctx,
});

const { given } = deciderSpec(providerConfigsDecider);

const providerConfigured = (
  config: JsonObject,
  alias: string | null = null,
): ProviderConfigEvent => ({
  type: 'ProviderConfigured',
  data: { state: 'prod', source: AWS, alias, config },
});
const providerConfigRemoved = (alias: string | null = null): ProviderConfigEvent => ({
  type: 'ProviderConfigRemoved',
  data: { state: 'prod', source: AWS, alias },
});

const withEnv = { region: 'eu-west-1', access_key: { env: 'AWS_ACCESS_KEY_ID' } };

/** The message `config` is refused with (PROVIDER_CONFIG.INVALID). */
function refused(config: JsonObject): string {
  try {
    decideProviderConfigs(configure(config), initialProviderConfigs());
  } catch (e) {
    expect((e as DomainError).code).toBe('PROVIDER_CONFIG.INVALID');
    return (e as DomainError).message;
  }
  throw new Error('accepted');
}

describe('ProviderConfigs decider', () => {
  it('stores a config exactly as given, env references included', () => {
    given()
      .when(configure(withEnv))
      .then([
        {
          type: 'ProviderConfigured',
          data: { state: 'prod', source: AWS, alias: null, config: withEnv },
        },
      ]);
  });

  it('records nothing when the same config is saved again, whatever its key order', () => {
    given(providerConfigured(withEnv))
      .when(configure({ access_key: { env: 'AWS_ACCESS_KEY_ID' }, region: 'eu-west-1' }))
      .then([]);
  });

  it('keeps the default and an aliased configuration apart', () => {
    const other = { region: 'us-east-1' };
    given(providerConfigured(withEnv))
      .when(configure(other, 'east'))
      .then([
        {
          type: 'ProviderConfigured',
          data: { state: 'prod', source: AWS, alias: 'east', config: other },
        },
      ]);
    given(providerConfigured(other, 'east')).when(remove()).thenFails('PROVIDER_CONFIG.NOT_FOUND');
  });

  it('removes a stored config once', () => {
    given(providerConfigured(withEnv))
      .when(remove())
      .then([{ type: 'ProviderConfigRemoved', data: { state: 'prod', source: AWS, alias: null } }]);
    given(providerConfigured(withEnv), providerConfigRemoved())
      .when(remove())
      .thenFails('PROVIDER_CONFIG.NOT_FOUND');
  });

  it('refuses an alias terraform would not accept', () => {
    given().when(configure(withEnv, 'not valid')).thenFails('PROVIDER_CONFIG.INVALID');
  });

  it('refuses text it could not give back exactly: a NUL or a lone surrogate, saying where', () => {
    expect(refused({ region: 'eu\u0000west' })).toBe('config at region holds a NUL character');
    expect(refused({ tags: { ['a\u0000']: 'x' } })).toBe(
      'config key tags."a\\u0000" holds a NUL character',
    );
    expect(refused({ list: ['ok', '\ud800'] })).toBe(
      'config at list[1] holds an unpaired UTF-16 surrogate',
    );
  });

  it('refuses an env reference that names no variable, saying where it is', () => {
    expect(refused({ access_key: { env: 5 } })).toBe(
      '{"env": …} at access_key must name an environment variable as a string, got 5',
    );
    expect(refused({ endpoints: [{ sqs: { env: 'NOT-A-NAME' } }] })).toMatch(
      /^\{"env": …\} at endpoints\[0\]\.sqs names "NOT-A-NAME", which is not an environment variable name/,
    );
    expect(refused({ token: { env: null } })).toMatch(/at token must name .* got null$/);
    // An object with more members than `env` is a value, not a reference.
    given()
      .when(configure({ assume_role: [{ env: 'x', role_arn: 'arn' }] }))
      .then([
        {
          type: 'ProviderConfigured',
          data: {
            state: 'prod',
            source: AWS,
            alias: null,
            config: { assume_role: [{ env: 'x', role_arn: 'arn' }] },
          },
        },
      ]);
  });

  it('survives a snapshot round trip', () => {
    const { state } = given(providerConfigured(withEnv), providerConfigured({}, 'b'));
    expect(state.configs.size).toBe(2);
    const json: unknown = JSON.parse(JSON.stringify(providerConfigsToSnapshot(state)));
    expect(providerConfigsFromSnapshot(json)).toEqual(state);
  });
});

describe('providerConfigHistory', () => {
  const meta = (actor: string, at: string) => ({
    actor,
    occurredAt: at,
    correlationId: 'c',
    causationId: null,
  });
  const configured = (
    actor: string,
    at: string,
    config: JsonObject,
    alias: string | null = null,
  ) => ({
    type: 'ProviderConfigured' as const,
    data: { state: 'prod', source: AWS, alias, config },
    metadata: meta(actor, at),
  });
  const events = [
    configured('alice', 't1', withEnv),
    configured('bob', 't2', { region: 'us-east-1' }, 'east'),
    configured('mallory', 't3', {
      ...withEnv,
      access_key: { env: 'KL_DATABASE_URL' },
      endpoints: [{ sqs: 'http://attacker' }],
    }),
    {
      type: 'ProviderConfigRemoved' as const,
      data: { state: 'prod', source: AWS, alias: null },
      metadata: meta('alice', 't4'),
    },
  ];

  it('says who changed what and when, per config, oldest first', () => {
    expect(providerConfigHistory(events, { source: AWS, alias: null })).toEqual([
      {
        at: 't1',
        actor: 'alice',
        action: 'configured',
        source: AWS,
        alias: null,
        config: withEnv,
        changedPaths: ['access_key', 'region'],
      },
      {
        at: 't3',
        actor: 'mallory',
        action: 'configured',
        source: AWS,
        alias: null,
        config: expect.objectContaining({ endpoints: [{ sqs: 'http://attacker' }] }),
        changedPaths: ['access_key.env', 'endpoints'],
      },
      {
        at: 't4',
        actor: 'alice',
        action: 'removed',
        source: AWS,
        alias: null,
        config: null,
        changedPaths: ['access_key', 'endpoints', 'region'],
      },
    ]);
  });

  it('covers every config of the state without a key', () => {
    expect(providerConfigHistory(events).map((c) => [c.actor, c.alias])).toEqual([
      ['alice', null],
      ['bob', 'east'],
      ['mallory', null],
      ['alice', null],
    ]);
  });
});
