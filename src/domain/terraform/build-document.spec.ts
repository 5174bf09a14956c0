import { fixtureText } from './__fixtures__/fixtures';
import { buildDocument, documentMeta } from './build-document';
import { JsonObject } from './json-value';
import { parseStateDocument } from './parse-state-document';
import { flattenInstances } from './state-instances';

const FIXTURES = ['modules.v1.tfstate.txt', 'deposed-tainted.tfstate.txt', 'odd-keys.tfstate.txt'];

function rebuild(text: string) {
  const doc = parseStateDocument(text);
  return buildDocument(documentMeta(doc), flattenInstances(doc));
}

describe('buildDocument', () => {
  it.each(FIXTURES)('rebuilds %s as terraform wrote it', (name) => {
    const text = fixtureText(name);
    const rebuilt = rebuild(text);
    expect(rebuilt).toEqual(JSON.parse(text));
    // Member order follows terraform's structs too, so even the bytes match.
    expect(JSON.stringify(rebuilt, null, 2) + '\n').toBe(text);
  });

  it.each(FIXTURES)('restores terraform order from shuffled instances of %s', (name) => {
    const text = fixtureText(name);
    const doc = parseStateDocument(text);
    const shuffled = flattenInstances(doc).reverse();
    const mid = Math.floor(shuffled.length / 2);
    const mixed = [...shuffled.slice(mid), ...shuffled.slice(0, mid)];
    expect(buildDocument(documentMeta(doc), mixed)).toEqual(JSON.parse(text));
  });

  it('orders like terraform: module, then mode (data first), type, name; keys none < int < string', () => {
    const provider = 'provider["registry.terraform.io/hashicorp/aws"]';
    const r = (module: string, mode: 'managed' | 'data', type: string, name: string) => ({
      module,
      mode,
      type,
      name,
      provider,
      each: null,
    });
    const i = (index_key?: number | string, deposed?: string) => ({
      schema_version: 0,
      attributes: {},
      ...(index_key === undefined ? {} : { index_key }),
      ...(deposed === undefined ? {} : { deposed }),
    });
    const doc = buildDocument(
      {
        terraformVersion: '1.11.4',
        serial: 1,
        lineage: 'l',
        outputs: {},
        checkResults: null,
        extra: {},
      },
      [
        { resource: r('module.b', 'managed', 'x', 'a'), instance: i() },
        { resource: r('', 'managed', 'z', 'a'), instance: i('b') },
        { resource: r('', 'managed', 'z', 'a'), instance: i(10) },
        { resource: r('', 'managed', 'z', 'a'), instance: i('a') },
        { resource: r('', 'managed', 'z', 'a'), instance: i(2) },
        { resource: r('', 'managed', 'z', 'a'), instance: i(2, 'bbbb') },
        { resource: r('', 'managed', 'z', 'a'), instance: i(2, 'aaaa') },
        { resource: r('module.a[10]', 'managed', 'x', 'a'), instance: i() },
        { resource: r('module.a[2]', 'managed', 'x', 'a'), instance: i() },
        { resource: r('', 'managed', 'a', 'b'), instance: i() },
        { resource: r('', 'data', 'z', 'z'), instance: i() },
        { resource: r('', 'managed', 'a', 'a'), instance: i() },
      ],
    );
    expect(doc.resources.map((x) => `${x.module ?? ''}|${x.mode}|${x.type}|${x.name}`)).toEqual([
      '|data|z|z',
      '|managed|a|a',
      '|managed|a|b',
      '|managed|z|a',
      // Go compares module paths as strings: [10] sorts before [2].
      'module.a[10]|managed|x|a',
      'module.a[2]|managed|x|a',
      'module.b|managed|x|a',
    ]);
    expect(doc.resources[3].instances.map((x) => [x.index_key, x.deposed])).toEqual([
      [2, undefined],
      [2, 'aaaa'],
      [2, 'bbbb'],
      [10, undefined],
      ['a', undefined],
      ['b', undefined],
    ]);
  });

  it('carries unknown members at every level through a rebuild', () => {
    const doc = JSON.parse(fixtureText('modules.v1.tfstate.txt')) as JsonObject;
    doc.encryption = { method: 'aes_gcm' };
    const resources = doc.resources as JsonObject[];
    resources[2].future = [1, 2];
    (resources[2].instances as JsonObject[])[1].identity = { id: 'x' };
    const parsed = parseStateDocument(JSON.stringify(doc));
    expect(buildDocument(documentMeta(parsed), flattenInstances(parsed))).toEqual(doc);
  });
});
