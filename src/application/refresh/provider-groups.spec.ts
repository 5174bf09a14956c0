import { flattenInstances, parseStateDocument } from '../../domain/terraform';
import { groupByProvider, parseProviderConfigRef, providerCensus } from './provider-groups';

describe('parseProviderConfigRef', () => {
  it.each([
    [
      'provider["registry.terraform.io/hashicorp/aws"]',
      'registry.terraform.io/hashicorp/aws',
      null,
    ],
    [
      'provider["registry.terraform.io/hashicorp/aws"].west',
      'registry.terraform.io/hashicorp/aws',
      'west',
    ],
    [
      'module.net.provider["registry.terraform.io/hashicorp/aws"].east',
      'registry.terraform.io/hashicorp/aws',
      'east',
    ],
    ['provider["example.com/Corp/Thing"]', 'example.com/corp/thing', null],
    ['provider.aws', 'registry.terraform.io/hashicorp/aws', null],
    ['provider.aws.west', 'registry.terraform.io/hashicorp/aws', 'west'],
  ])('%s', (provider, source, alias) => {
    expect(parseProviderConfigRef(provider)).toEqual({ source, alias });
  });

  it('refuses what is not a provider address', () => {
    expect(() => parseProviderConfigRef('aws_instance.x')).toThrow(/not a provider configuration/);
  });
});

describe('groupByProvider', () => {
  it('groups managed instances per provider string, skipping data sources', () => {
    const resource = (mode: string, type: string, provider: string) => ({
      mode,
      type,
      name: 'x',
      provider,
      instances: [{ schema_version: 0, attributes: { id: type } }],
    });
    const doc = parseStateDocument({
      version: 4,
      terraform_version: '1.11.4',
      serial: 1,
      lineage: 'l',
      outputs: {},
      resources: [
        resource('managed', 'aws_vpc', 'provider["registry.terraform.io/hashicorp/aws"]'),
        resource('managed', 'aws_subnet', 'provider["registry.terraform.io/hashicorp/aws"].west'),
        resource('data', 'aws_ami', 'provider["registry.terraform.io/hashicorp/aws"]'),
        resource('managed', 'aws_eip', 'provider["registry.terraform.io/hashicorp/aws"]'),
      ],
    });

    const groups = groupByProvider(flattenInstances(doc));

    expect(groups.map((g) => [g.alias, g.instances.map((i) => i.address)])).toEqual([
      [null, ['aws_vpc.x', 'aws_eip.x']],
      ['west', ['aws_subnet.x']],
    ]);
  });
});

describe('providerCensus', () => {
  const AWS = 'provider["registry.terraform.io/hashicorp/aws"]';
  const document = {
    version: 4,
    terraform_version: '1.11.4',
    serial: 12,
    lineage: 'l',
    outputs: {},
    resources: [
      {
        mode: 'managed',
        type: 'aws_vpc',
        name: 'a',
        provider: AWS,
        instances: [
          // An attribute named "provider" is the resource's own data, not a provider to start.
          { schema_version: 0, attributes: { id: 'v', provider: 'provider["example.com/x/y"]' } },
        ],
      },
      {
        mode: 'managed',
        type: 'aws_subnet',
        name: 's',
        provider: `${AWS}.west`,
        instances: [0, 1, 2].map((i) => ({ index_key: i, schema_version: 0, attributes: { i } })),
      },
      {
        mode: 'data',
        type: 'aws_ami',
        name: 'd',
        provider: 'provider["example.com/a/b"]',
        instances: [{ schema_version: 0, attributes: {} }],
      },
      {
        mode: 'managed',
        type: 'null_resource',
        name: 'none',
        provider: 'provider["example.com/c/d"]',
        instances: [],
      },
      {
        mode: 'managed',
        type: 'terraform_data',
        name: 't',
        provider: 'provider["terraform.io/builtin/terraform"]',
        instances: [{ schema_version: 0, attributes: { id: 't' } }],
      },
      {
        mode: 'managed',
        type: 'aws_eip',
        name: 'e',
        module: 'module.net',
        provider: AWS,
        instances: [{ schema_version: 0, attributes: { id: 'e' } }],
      },
    ],
  };

  it('finds the serial and the groups groupByProvider makes, with their instance counts', () => {
    const text = JSON.stringify(document);
    const groups = groupByProvider(flattenInstances(parseStateDocument(text)));

    const census = providerCensus(text);

    expect(census?.serial).toBe(12);
    expect(census?.counts).toEqual(
      groups.map((g) => ({
        provider: g.provider,
        source: g.source,
        alias: g.alias,
        instances: g.instances.length,
      })),
    );
    expect(census?.counts.map((c) => [c.source, c.alias, c.instances])).toEqual([
      ['registry.terraform.io/hashicorp/aws', null, 2],
      ['registry.terraform.io/hashicorp/aws', 'west', 3],
      ['terraform.io/builtin/terraform', null, 1],
    ]);
  });

  it.each([
    ['not JSON', '{"serial": 1, "resources": ['],
    ['no serial', JSON.stringify({ ...document, serial: '12' })],
    ['no resources', JSON.stringify({ ...document, resources: {} })],
    [
      'a provider string that is no address',
      JSON.stringify({
        ...document,
        resources: [{ ...document.resources[0], provider: 'aws_instance.x' }],
      }),
    ],
  ])('gives up on %s', (_what, text) => {
    expect(providerCensus(text)).toBeNull();
  });
});
