import { flattenInstances, parseStateDocument } from '../../domain/terraform';
import { groupByProvider, parseProviderConfigRef } from './provider-groups';

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
