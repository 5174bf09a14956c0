import { SchemaBlock } from '../../domain/cty/schema';
import { resolveEnvReferences, shapeProviderConfig } from './provider-config';

describe('resolveEnvReferences', () => {
  it('replaces {"env": NAME} anywhere, leaving other values alone', () => {
    const config = {
      region: 'eu-west-1',
      secret_key: { env: 'SECRET' },
      assume_role: [{ role_arn: { env: 'ROLE' }, tags: { env: 'prod', team: 'net' } }],
    };

    expect(resolveEnvReferences(config, { SECRET: 's3', ROLE: 'arn:x' }, 'provider aws')).toEqual({
      region: 'eu-west-1',
      secret_key: 's3',
      // Two members: a map that happens to have an "env" key, not a reference.
      assume_role: [{ role_arn: 'arn:x', tags: { env: 'prod', team: 'net' } }],
    });
  });

  it('names the path and the variable that is not set', () => {
    expect(() =>
      resolveEnvReferences({ assume_role: [{ role_arn: { env: 'ROLE' } }] }, {}, 'provider aws'),
    ).toThrow(
      'provider aws: assume_role[0].role_arn refers to environment variable ROLE, which is not set',
    );
  });
});

describe('resolveEnvReferences under a server policy', () => {
  const policy = {
    refusal: (name: string) =>
      name.startsWith('AWS_') ? null : 'allow it with KL_REFRESH_ENV_ALLOW',
  };
  const env = { AWS_ACCESS_KEY_ID: 'AKIA', KL_DATABASE_URL: 'postgres://u:secret@db/kl' };

  it('resolves the names the policy allows', () => {
    expect(
      resolveEnvReferences({ access_key: { env: 'AWS_ACCESS_KEY_ID' } }, env, 'provider aws', {
        policy,
      }),
    ).toEqual({ access_key: 'AKIA' });
  });

  it('refuses any other name, naming the key path and the variable, never its value', () => {
    let error: unknown;
    try {
      resolveEnvReferences(
        {
          access_key: { env: 'AWS_ACCESS_KEY_ID' },
          endpoints: [{ sqs: 'http://attacker', token: { env: 'KL_DATABASE_URL' } }],
        },
        env,
        'provider aws',
        { policy },
      );
    } catch (e) {
      error = e;
    }
    expect(error).toMatchObject({
      code: 'REFRESH.CONFIG_ENV_REFUSED',
      message:
        'provider aws: endpoints[0].token refers to environment variable KL_DATABASE_URL, which this server may not read: allow it with KL_REFRESH_ENV_ALLOW',
    });
    expect(JSON.stringify(error)).not.toContain('secret');
  });

  it('refuses an unset name it does not allow as refused, not as missing', () => {
    expect(() =>
      resolveEnvReferences({ k: { env: 'NOT_SET_ANYWHERE' } }, {}, 'provider aws', { policy }),
    ).toThrow(expect.objectContaining({ code: 'REFRESH.CONFIG_ENV_REFUSED' }));
  });
});

describe('shapeProviderConfig', () => {
  const block: SchemaBlock = {
    attributes: [
      { name: 'region', type: 'string', optional: true },
      { name: 'max_retries', type: 'number', optional: true },
    ],
    blockTypes: [
      {
        typeName: 'endpoints',
        nesting: 'list',
        block: {
          attributes: [
            { name: 's3', type: 'string' },
            { name: 'sts', type: 'string' },
          ],
          blockTypes: [],
        },
      },
      {
        typeName: 'features',
        nesting: 'single',
        block: { attributes: [{ name: 'on', type: 'bool' }], blockTypes: [] },
      },
    ],
  };

  it('fills every attribute with null and absent list blocks with []', () => {
    expect(shapeProviderConfig(block, {}, 'p')).toEqual({
      region: null,
      max_retries: null,
      endpoints: [],
      features: null,
    });
  });

  it('takes a lone object for a list block and shapes nested objects too', () => {
    expect(
      shapeProviderConfig(block, { endpoints: { s3: 'http://moto' }, features: {} }, 'p'),
    ).toEqual({
      region: null,
      max_retries: null,
      endpoints: [{ s3: 'http://moto', sts: null }],
      features: { on: null },
    });
  });

  it('refuses an argument the provider does not have', () => {
    expect(() => shapeProviderConfig(block, { endpoints: [{ ec3: 'x' }] }, 'provider aws')).toThrow(
      'provider aws: provider config.endpoints[0] has no attribute "ec3"',
    );
  });
});
