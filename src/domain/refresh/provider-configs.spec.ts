import { DomainError } from '../shared/domain-error';
import { CommandContext } from '../shared/event';
import { JsonObject } from '../terraform/json-value';
import {
  decideProviderConfigs,
  evolveProviderConfigs,
  initialProviderConfigs,
  ProviderConfigCommand,
  ProviderConfigEvent,
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

function given(...commands: ProviderConfigCommand[]) {
  let state = initialProviderConfigs();
  for (const c of commands)
    state = decideProviderConfigs(c, state).reduce(evolveProviderConfigs, state);
  return {
    state,
    when: (command: ProviderConfigCommand) => ({
      then: (expected: ProviderConfigEvent[]) =>
        expect(decideProviderConfigs(command, state)).toEqual(expected),
      thenFails: (code: string) => {
        let error: unknown;
        try {
          decideProviderConfigs(command, state);
        } catch (e) {
          error = e;
        }
        expect(error).toBeInstanceOf(DomainError);
        expect((error as DomainError).code).toBe(code);
      },
    }),
  };
}

const withEnv = { region: 'eu-west-1', access_key: { env: 'AWS_ACCESS_KEY_ID' } };

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
    given(configure(withEnv))
      .when(configure({ access_key: { env: 'AWS_ACCESS_KEY_ID' }, region: 'eu-west-1' }))
      .then([]);
  });

  it('keeps the default and an aliased configuration apart', () => {
    const other = { region: 'us-east-1' };
    given(configure(withEnv))
      .when(configure(other, 'east'))
      .then([
        {
          type: 'ProviderConfigured',
          data: { state: 'prod', source: AWS, alias: 'east', config: other },
        },
      ]);
    given(configure(other, 'east')).when(remove()).thenFails('PROVIDER_CONFIG.NOT_FOUND');
  });

  it('removes a stored config once', () => {
    given(configure(withEnv))
      .when(remove())
      .then([{ type: 'ProviderConfigRemoved', data: { state: 'prod', source: AWS, alias: null } }]);
    given(configure(withEnv), remove()).when(remove()).thenFails('PROVIDER_CONFIG.NOT_FOUND');
  });

  it('refuses an alias terraform would not accept', () => {
    given().when(configure(withEnv, 'not valid')).thenFails('PROVIDER_CONFIG.INVALID');
  });

  it('survives a snapshot round trip', () => {
    const { state } = given(configure(withEnv), configure({}, 'b'));
    const json: unknown = JSON.parse(JSON.stringify(providerConfigsToSnapshot(state)));
    expect(providerConfigsFromSnapshot(json)).toEqual(state);
  });
});
