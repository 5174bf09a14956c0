import { decodeMsgpack, encodeMsgpack } from './cty-codec';
import { CtyError } from './cty-error';
import { ctyTypeJson } from './cty-type';
import { blockType } from './implied-type';
import { SchemaBlock } from './schema';

const inner: SchemaBlock = {
  attributes: [
    { name: 'status', type: 'string', optional: true },
    { name: 'days', type: 'number', optional: true },
  ],
  blockTypes: [],
};

const block: SchemaBlock = {
  attributes: [
    { name: 'id', type: 'string', computed: true },
    { name: 'tags', type: ['map', 'string'], optional: true },
    {
      name: 'rules',
      nestedType: {
        nesting: 'list',
        attributes: [
          { name: 'name', type: 'string', required: true },
          { name: 'priority', type: 'number', optional: true },
        ],
      },
      optional: true,
    },
  ],
  blockTypes: [
    { typeName: 'timeouts', nesting: 'single', block: inner },
    { typeName: 'settings', nesting: 'group', block: inner },
    { typeName: 'versioning_configuration', nesting: 'list', block: inner, maxItems: 1 },
    { typeName: 'grant', nesting: 'set', block: inner },
    { typeName: 'env', nesting: 'map', block: inner },
  ],
};

describe('block implied type', () => {
  it('types nested blocks by nesting mode and nested attributes by theirs', () => {
    const obj = ['object', { days: 'number', status: 'string' }];
    expect(ctyTypeJson(blockType(block))).toEqual([
      'object',
      {
        env: ['map', obj],
        grant: ['set', obj],
        id: 'string',
        rules: ['list', ['object', { name: 'string', priority: 'number' }]],
        settings: obj,
        tags: ['map', 'string'],
        timeouts: obj,
        versioning_configuration: ['list', obj],
      },
    ]);
  });

  it('types a list block with dynamic attributes as dynamic, as Terraform does', () => {
    const dyn: SchemaBlock = {
      attributes: [],
      blockTypes: [
        {
          typeName: 'l',
          nesting: 'list',
          block: { attributes: [{ name: 'v', type: 'dynamic' }], blockTypes: [] },
        },
        {
          typeName: 's',
          nesting: 'single',
          block: { attributes: [{ name: 'v', type: 'dynamic' }], blockTypes: [] },
        },
      ],
    };
    expect(ctyTypeJson(blockType(dyn))).toEqual([
      'object',
      { l: 'dynamic', s: ['object', { v: 'dynamic' }] },
    ]);
  });

  it('fills every attribute: null for attributes, empty for absent list/set/map/group blocks', () => {
    const type = blockType(block);
    const encoded = encodeMsgpack(type, { id: 'b-1' });
    expect(decodeMsgpack(type, encoded)).toEqual({
      env: {},
      grant: [],
      id: 'b-1',
      rules: null,
      settings: { days: null, status: null },
      tags: null,
      timeouts: null,
      versioning_configuration: [],
    });
  });

  it('round-trips every nesting mode and fills nested attribute objects', () => {
    const type = blockType(block);
    const value = {
      id: 'b-1',
      tags: { team: 'core' },
      rules: [{ name: 'r1' }],
      timeouts: { status: 'x' },
      settings: { days: 3 },
      versioning_configuration: [{ status: 'Enabled' }],
      grant: [{ status: 'a', days: 1 }, { status: 'b' }],
      env: { prod: { days: 7 } },
    };
    const encoded = encodeMsgpack(type, value);
    const decoded = decodeMsgpack(type, encoded);
    expect(decoded).toEqual({
      env: { prod: { days: 7, status: null } },
      grant: [
        { days: 1, status: 'a' },
        { days: null, status: 'b' },
      ],
      id: 'b-1',
      rules: [{ name: 'r1', priority: null }],
      settings: { days: 3, status: null },
      tags: { team: 'core' },
      timeouts: { days: null, status: 'x' },
      versioning_configuration: [{ days: null, status: 'Enabled' }],
    });
    expect(Buffer.from(encodeMsgpack(type, decoded)).equals(Buffer.from(encoded))).toBe(true);
  });

  it('keeps an explicit null block as null (what a provider sent survives a round trip)', () => {
    const type = blockType(block);
    const decoded = decodeMsgpack(
      type,
      encodeMsgpack(type, { versioning_configuration: null }),
    ) as Record<string, unknown>;
    expect(decoded.versioning_configuration).toBeNull();
  });

  it('names the attribute path of a bad value', () => {
    const type = blockType(block);
    let err: unknown;
    try {
      encodeMsgpack(type, { versioning_configuration: [{ status: { nested: true } }] });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(CtyError);
    expect((err as CtyError).code).toBe('CTY.TYPE_MISMATCH');
    expect((err as CtyError).path).toBe('versioning_configuration[0].status');
    expect((err as CtyError).message).toContain(
      'versioning_configuration[0].status: string required',
    );
  });
});
