import { DomainError } from '../shared/domain-error';
import { fixtureLines, fixtureText } from './__fixtures__/fixtures';
import {
  formatInstanceAddress,
  formatModulePath,
  InstanceAddress,
  parseInstanceAddress,
  parseModulePath,
} from './instance-address';
import { parseStateDocument } from './parse-state-document';
import { flattenInstances } from './state-instances';

describe('instance addresses', () => {
  const cases: [string, InstanceAddress][] = [
    ['aws_s3_bucket.b', { module: [], mode: 'managed', type: 'aws_s3_bucket', name: 'b' }],
    ['data.aws_ami.x', { module: [], mode: 'data', type: 'aws_ami', name: 'x' }],
    [
      'aws_instance.web[0]',
      { module: [], mode: 'managed', type: 'aws_instance', name: 'web', key: 0 },
    ],
    [
      'aws_instance.web[12]',
      { module: [], mode: 'managed', type: 'aws_instance', name: 'web', key: 12 },
    ],
    [
      'aws_instance.web["0"]',
      { module: [], mode: 'managed', type: 'aws_instance', name: 'web', key: '0' },
    ],
    ['data.aws_ami.x["k"]', { module: [], mode: 'data', type: 'aws_ami', name: 'x', key: 'k' }],
    [
      'module.a["x"].module.b[0].aws_s3_bucket.b["k"]',
      {
        module: [
          { name: 'a', key: 'x' },
          { name: 'b', key: 0 },
        ],
        mode: 'managed',
        type: 'aws_s3_bucket',
        name: 'b',
        key: 'k',
      },
    ],
    [
      'module.net.data.aws_vpc.main',
      { module: [{ name: 'net' }], mode: 'data', type: 'aws_vpc', name: 'main' },
    ],
    [
      'aws_instance.web (deposed object 567196d8)',
      { module: [], mode: 'managed', type: 'aws_instance', name: 'web', deposed: '567196d8' },
    ],
    [
      'module.a[1].aws_instance.web["k"] (deposed object 00000001)',
      {
        module: [{ name: 'a', key: 1 }],
        mode: 'managed',
        type: 'aws_instance',
        name: 'web',
        key: 'k',
        deposed: '00000001',
      },
    ],
    // A resource type may be called "module".
    ['module.x', { module: [], mode: 'managed', type: 'module', name: 'x' }],
  ];

  it.each(cases)('formats and parses %s', (text, parts) => {
    expect(formatInstanceAddress(parts)).toBe(text);
    expect(parseInstanceAddress(text)).toEqual(parts);
  });

  it('quotes string keys exactly like terraform state list', () => {
    // terraform 1.11 listed these keys itself: quotes, backslashes, ${ and %{,
    // control and non-printable runes escaped, printable unicode kept.
    const doc = parseStateDocument(fixtureText('odd-keys.tfstate.txt'));
    const ours = flattenInstances(doc).map((i) => i.address);
    expect(ours.sort()).toEqual(fixtureLines('odd-keys.state-list.txt').sort());
    for (const address of ours) {
      expect(formatInstanceAddress(parseInstanceAddress(address))).toBe(address);
    }
    const keys = ours.map((a) => parseInstanceAddress(a).key);
    expect(keys).toEqual(
      expect.arrayContaining(['q"uote', 'back\\slash', '${interp}', '%{dir}', 'new\nline']),
    );
    expect(keys).toEqual(expect.arrayContaining(['nb\u00a0sp', 'ctl\u0001', 'emoji😀', '']));
  });

  it('matches terraform state list for modules, count, for_each and data sources', () => {
    const doc = parseStateDocument(fixtureText('modules.v1.tfstate.txt'));
    const ours = flattenInstances(doc).map((i) => i.address);
    expect(ours.sort()).toEqual(fixtureLines('modules.state-list.txt').sort());
  });

  it('names deposed objects apart from the current object', () => {
    const doc = parseStateDocument(fixtureText('deposed-tainted.tfstate.txt'));
    const cbd = flattenInstances(doc)
      .map((i) => i.address)
      .filter((a) => a.startsWith('terraform_data.cbd'));
    expect(cbd).toHaveLength(2);
    expect(cbd[0]).toBe('terraform_data.cbd');
    expect(cbd[1]).toMatch(/^terraform_data\.cbd \(deposed object [0-9a-f]{8}\)$/);
  });

  it('parses and formats module paths', () => {
    expect(parseModulePath('')).toEqual([]);
    const path = 'module.outer["x"].module.inner[1]';
    expect(parseModulePath(path)).toEqual([
      { name: 'outer', key: 'x' },
      { name: 'inner', key: 1 },
    ]);
    expect(formatModulePath(parseModulePath(path))).toBe(path);
  });

  it.each([
    'module.',
    'module.a.',
    'module.a["x"',
    'modules.a',
    'module.a[01]',
    'module.a[-1]',
    'module.a["${x}"]',
    'module.a.aws_s3_bucket.b',
  ])('rejects the module path %j', (path) => {
    expect(() => parseModulePath(path)).toThrow(DomainError);
  });

  it.each([
    '',
    'aws_instance',
    'aws_instance.',
    'aws_instance.web[',
    'aws_instance.web[x]',
    'aws_instance.web["x"',
    'aws_instance.web[0][1]',
    'aws_instance.web extra',
    'data.aws_ami',
    '1bad.name',
  ])('rejects the instance address %j', (address) => {
    expect(() => parseInstanceAddress(address)).toThrow(
      expect.objectContaining({ code: 'ADDRESS.INVALID' }),
    );
  });
});
