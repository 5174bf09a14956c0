import { CtyJson } from '../../domain/cty/cty-type';
import { Diagnostic } from '../../domain/cty/diagnostic';
import { ProviderSchema } from '../../domain/cty/schema';

/** A state value as both our JSON and the provider's exact msgpack bytes. */
export interface StateValue {
  /** cty JSON, as a state file stores attributes; null when the object is gone. */
  value: CtyJson;
  msgpack: Uint8Array;
}

export interface ReadResourceRequest {
  typeName: string;
  /** Usually the `upgradeResourceState` result; plain JSON is encoded against the schema. */
  currentState: StateValue | CtyJson;
  /** The instance's `private` blob (base64-decoded from state). */
  private?: Uint8Array;
}

export interface ReadResourceResult {
  newState: StateValue;
  private: Uint8Array;
  diagnostics: Diagnostic[];
  /** Set when the provider deferred the read (reason name, e.g. ABSENT_PREREQ). */
  deferred?: string;
}

export interface UpgradeResourceStateRequest {
  typeName: string;
  /** The instance's `schema_version` in state. */
  version: number;
  /** The instance's `attributes` object, or its JSON text. */
  rawState: CtyJson | string;
}

export interface ImportedResource {
  typeName: string;
  state: StateValue;
  private: Uint8Array;
}

/**
 * One provider plugin process, protocol 5 or 6. Every call has a deadline;
 * error diagnostics raise `PROVIDER.DIAGNOSTICS`, a dead plugin
 * `PROVIDER.CRASHED`, a late one `PROVIDER.TIMEOUT`; warnings are returned.
 */
export interface ProviderClient {
  readonly protocolVersion: number;
  readonly pid: number | undefined;
  /** The private directory that holds the plugin's socket; removed on close. */
  readonly socketDir: string;
  /** Settles when the plugin process has ended, for whatever reason (close() included). */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  /** Calls GetSchema / GetProviderSchema and uses the result for later encoding. */
  getSchema(): Promise<ProviderSchema>;
  /** Uses a schema obtained earlier (e.g. from a cache) instead of asking the provider. */
  useSchema(schema: ProviderSchema): void;
  /** The provider config as JSON; every schema attribute left out is sent as null. */
  configure(config: CtyJson, options?: { terraformVersion?: string }): Promise<Diagnostic[]>;
  upgradeResourceState(
    request: UpgradeResourceStateRequest,
  ): Promise<{ state: StateValue; diagnostics: Diagnostic[] }>;
  readResource(request: ReadResourceRequest): Promise<ReadResourceResult>;
  importResourceState(
    typeName: string,
    id: string,
  ): Promise<{ resources: ImportedResource[]; diagnostics: Diagnostic[] }>;
  /** Cancels in-flight work (Ctrl-C); the plugin keeps running. */
  stop(): Promise<void>;
  /** Stop, ask the plugin to exit, wait a bounded time, then SIGKILL. Idempotent. */
  close(): Promise<void>;
}
