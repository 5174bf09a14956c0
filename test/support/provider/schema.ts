import { CtyType } from './cty';

export interface AttributeSpec {
  name: string;
  type: CtyType;
  required?: boolean;
  optional?: boolean;
  computed?: boolean;
  sensitive?: boolean;
  description: string;
}

export interface NestedBlockSpec {
  typeName: string;
  nesting: 'SINGLE' | 'LIST' | 'SET';
  block: BlockSpec;
  maxItems?: number;
}

export interface BlockSpec {
  attributes: AttributeSpec[];
  blockTypes: NestedBlockSpec[];
}

export interface SchemaSpec {
  version: number;
  block: BlockSpec;
}

export const PROVIDER_SCHEMA: SchemaSpec = {
  version: 0,
  block: {
    attributes: [
      {
        name: 'state_dir',
        type: 'string',
        optional: true,
        description: 'Directory holding one JSON file per remote object.',
      },
    ],
    blockTypes: [],
  },
};

/** Version 1 renamed `note` (version 0) to `comment`. */
export const ITEM_SCHEMA: SchemaSpec = {
  version: 1,
  block: {
    attributes: [
      { name: 'id', type: 'string', computed: true, description: 'Object id.' },
      { name: 'name', type: 'string', required: true, description: 'Changing it replaces.' },
      { name: 'comment', type: 'string', optional: true, description: 'Free text.' },
      { name: 'tags', type: ['set', 'string'], optional: true, description: 'A set.' },
      { name: 'payload', type: 'dynamic', optional: true, description: 'Any value.' },
      {
        name: 'secret',
        type: 'string',
        optional: true,
        sensitive: true,
        description: 'Sensitive.',
      },
    ],
    blockTypes: [
      {
        typeName: 'rule',
        nesting: 'LIST',
        block: {
          attributes: [
            { name: 'port', type: 'number', required: true, description: 'Port.' },
            { name: 'protocol', type: 'string', optional: true, description: 'Protocol.' },
          ],
          blockTypes: [],
        },
      },
      {
        typeName: 'settings',
        nesting: 'SINGLE',
        block: {
          attributes: [
            { name: 'enabled', type: 'bool', optional: true, description: 'Flag.' },
            { name: 'level', type: 'number', optional: true, description: 'Level.' },
          ],
          blockTypes: [],
        },
      },
    ],
  },
};

export const BUCKET_SCHEMA: SchemaSpec = {
  version: 0,
  block: {
    attributes: [
      { name: 'id', type: 'string', computed: true, description: 'Object id.' },
      { name: 'name', type: 'string', required: true, description: 'Changing it replaces.' },
      { name: 'size', type: 'number', optional: true, description: 'Size.' },
      {
        name: 'labels',
        type: ['map', 'string'],
        optional: true,
        description: 'A map.',
      },
    ],
    blockTypes: [],
  },
};

/** Reads a kltest_item by id. */
export const ITEM_DATA_SCHEMA: SchemaSpec = {
  version: 0,
  block: {
    attributes: [
      { name: 'id', type: 'string', required: true, description: 'Object id.' },
      { name: 'name', type: 'string', computed: true, description: 'Name of the item.' },
      { name: 'comment', type: 'string', computed: true, description: 'Comment of the item.' },
    ],
    blockTypes: [],
  },
};

export const RESOURCE_SCHEMAS: Record<string, SchemaSpec> = {
  kltest_item: ITEM_SCHEMA,
  kltest_bucket: BUCKET_SCHEMA,
};

export const DATA_SOURCE_SCHEMAS: Record<string, SchemaSpec> = {
  kltest_item: ITEM_DATA_SCHEMA,
};

export function impliedType(block: BlockSpec): CtyType {
  const attrs: Record<string, CtyType> = {};
  for (const attribute of block.attributes) attrs[attribute.name] = attribute.type;
  for (const nested of block.blockTypes) {
    const element = impliedType(nested.block);
    attrs[nested.typeName] =
      nested.nesting === 'SINGLE' ? element : [nested.nesting === 'LIST' ? 'list' : 'set', element];
  }
  return ['object', attrs];
}
