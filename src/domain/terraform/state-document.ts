import { IndexKey, ResourceMode } from './instance-address';
import { JsonObject, JsonValue } from './json-value';

/**
 * A terraform v4 state document. Only the fields we reason about are typed;
 * every other member (OpenTofu and newer terraform add some, e.g. `identity`)
 * is carried through untouched by the index signatures.
 */
export interface StateDocumentV4 {
  version: 4;
  terraform_version: string;
  serial: number;
  lineage: string;
  outputs: Record<string, OutputV4>;
  resources: ResourceV4[];
  /** Absent before terraform 1.3; null when there are no checks. */
  check_results?: JsonValue;
  [extra: string]: JsonValue | undefined;
}

export interface OutputV4 {
  value: JsonValue;
  type?: JsonValue;
  sensitive?: boolean;
  [extra: string]: JsonValue | undefined;
}

export interface ResourceV4 {
  /** Module instance path; absent for the root module. */
  module?: string;
  mode: ResourceMode;
  type: string;
  name: string;
  /** Only written by terraform 0.12; later versions derive it from the keys. */
  each?: 'list' | 'map';
  provider: string;
  instances: InstanceObjectV4[];
  [extra: string]: JsonValue | undefined;
}

export interface InstanceObjectV4 {
  index_key?: IndexKey;
  status?: 'tainted';
  deposed?: string;
  schema_version: number;
  attributes?: JsonObject;
  attributes_flat?: Record<string, string>;
  sensitive_attributes?: JsonValue[];
  private?: string;
  dependencies?: string[];
  create_before_destroy?: boolean;
  [extra: string]: JsonValue | undefined;
}

/** The members terraform defines at each level; anything else is "extra". */
export const DOCUMENT_FIELDS = [
  'version',
  'terraform_version',
  'serial',
  'lineage',
  'outputs',
  'resources',
  'check_results',
] as const;

export const RESOURCE_FIELDS = [
  'module',
  'mode',
  'type',
  'name',
  'each',
  'provider',
  'instances',
] as const;
