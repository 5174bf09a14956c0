/**
 * The plain objects proto-loader produces for the messages we read
 * (keepCase, longs and enums as strings, defaults filled in). Protocol 5 and
 * 6 share these shapes; only the RPC names differ.
 */
export interface WireDynamicValue {
  msgpack: Buffer;
  json: Buffer;
}

export interface WireStep {
  selector?: 'attribute_name' | 'element_key_string' | 'element_key_int';
  attribute_name?: string;
  element_key_string?: string;
  element_key_int?: string;
}

export interface WireDiagnostic {
  severity: 'INVALID' | 'ERROR' | 'WARNING';
  summary: string;
  detail: string;
  attribute: { steps: WireStep[] } | null;
}

export interface WireAttribute {
  name: string;
  type: Buffer;
  nested_type?: WireObject | null;
  description: string;
  required: boolean;
  optional: boolean;
  computed: boolean;
  sensitive: boolean;
  deprecated: boolean;
  write_only: boolean;
}

export interface WireObject {
  attributes: WireAttribute[];
  nesting: 'INVALID' | 'SINGLE' | 'LIST' | 'SET' | 'MAP';
}

export interface WireNestedBlock {
  type_name: string;
  block: WireBlock | null;
  nesting: 'INVALID' | 'SINGLE' | 'LIST' | 'SET' | 'MAP' | 'GROUP';
  min_items: string;
  max_items: string;
}

export interface WireBlock {
  version: string;
  attributes: WireAttribute[];
  block_types: WireNestedBlock[];
  description: string;
  deprecated: boolean;
}

export interface WireSchema {
  version: string;
  block: WireBlock | null;
}

export interface WireServerCapabilities {
  plan_destroy: boolean;
  get_provider_schema_optional: boolean;
  move_resource_state: boolean;
}

export interface WireGetSchemaResponse {
  provider: WireSchema | null;
  resource_schemas: Record<string, WireSchema>;
  data_source_schemas: Record<string, WireSchema>;
  diagnostics: WireDiagnostic[];
  provider_meta: WireSchema | null;
  server_capabilities: WireServerCapabilities | null;
}

export interface WireDiagnosticsResponse {
  diagnostics: WireDiagnostic[];
}

export interface WireUpgradeResponse extends WireDiagnosticsResponse {
  upgraded_state: WireDynamicValue | null;
}

export interface WireReadResponse extends WireDiagnosticsResponse {
  new_state: WireDynamicValue | null;
  private: Buffer;
  deferred: { reason: string } | null;
}

export interface WireImportResponse extends WireDiagnosticsResponse {
  imported_resources: { type_name: string; state: WireDynamicValue | null; private: Buffer }[];
  deferred: { reason: string } | null;
}

export interface WireStopResponse {
  Error: string;
}

export interface WireMetadataResponse extends WireDiagnosticsResponse {
  resources: { type_name: string }[];
  data_sources: { type_name: string }[];
}
