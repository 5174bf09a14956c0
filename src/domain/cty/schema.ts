import { CtyTypeJson } from './cty-type';

/**
 * A provider's schemas as plain, JSON-serialisable data, decoded from the
 * GetSchema (protocol 5) / GetProviderSchema (protocol 6) response. This is
 * what the schema cache stores, so flags are left out when false: the AWS
 * provider's schema is 20 MB of JSON with them and much less without.
 */
export type BlockNesting = 'single' | 'group' | 'list' | 'set' | 'map';
export type AttributeNesting = 'single' | 'list' | 'set' | 'map';

export interface SchemaAttribute {
  name: string;
  /** Set for ordinary attributes. */
  type?: CtyTypeJson;
  /** Set instead of `type` for protocol 6 nested attributes. */
  nestedType?: SchemaNestedObject;
  description?: string;
  required?: boolean;
  optional?: boolean;
  computed?: boolean;
  sensitive?: boolean;
  deprecated?: boolean;
  writeOnly?: boolean;
}

export interface SchemaNestedObject {
  nesting: AttributeNesting;
  attributes: SchemaAttribute[];
}

export interface SchemaNestedBlock {
  typeName: string;
  nesting: BlockNesting;
  block: SchemaBlock;
  minItems?: number;
  maxItems?: number;
}

export interface SchemaBlock {
  attributes: SchemaAttribute[];
  blockTypes: SchemaNestedBlock[];
  description?: string;
  deprecated?: boolean;
}

export interface VersionedSchema {
  version: number;
  block: SchemaBlock;
}

export interface ProviderSchema {
  /** 5 or 6: which wire protocol produced it. */
  protocolVersion: number;
  provider: VersionedSchema;
  providerMeta?: VersionedSchema;
  resourceSchemas: Record<string, VersionedSchema>;
  dataSourceSchemas: Record<string, VersionedSchema>;
  serverCapabilities: {
    planDestroy: boolean;
    getProviderSchemaOptional: boolean;
    moveResourceState: boolean;
  };
}

export function emptyBlock(): SchemaBlock {
  return { attributes: [], blockTypes: [] };
}
