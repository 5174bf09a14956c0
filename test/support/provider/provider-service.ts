import { appendFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import { CtyObject, CtyType, CtyValue, fromCtyJson, fromMsgpack, toMsgpack } from './cty';
import { ObjectStore } from './object-store';
import {
  applyChange,
  dataSourceSchema,
  importObject,
  planChange,
  ProviderError,
  readDataSource,
  readObject,
  resourceSchema,
  upgradeState,
} from './resources';
import {
  BlockSpec,
  DATA_SOURCE_SCHEMAS,
  impliedType,
  PROVIDER_SCHEMA,
  RESOURCE_SCHEMAS,
  SchemaSpec,
} from './schema';

interface WireDynamicValue {
  msgpack?: Buffer;
  json?: Buffer;
}

type Request = Record<string, unknown>;
type Response = Record<string, unknown>;

function decodeValue(type: CtyType, value: unknown): CtyValue {
  const dv = value as WireDynamicValue | null | undefined;
  if (dv?.msgpack && dv.msgpack.length > 0) return fromMsgpack(type, dv.msgpack);
  if (dv?.json && dv.json.length > 0) return fromCtyJson(type, JSON.parse(dv.json.toString()));
  return null;
}

function decodeObject(type: CtyType, value: unknown): CtyObject | null {
  return decodeValue(type, value) as CtyObject | null;
}

function encodeValue(type: CtyType, value: CtyValue): WireDynamicValue {
  return { msgpack: Buffer.from(toMsgpack(type, value)) };
}

function protoSchema(spec: SchemaSpec): Response {
  return { version: spec.version, block: protoBlock(spec.block) };
}

function protoBlock(block: BlockSpec): Response {
  return {
    version: 0,
    attributes: block.attributes.map((a) => ({
      name: a.name,
      type: Buffer.from(JSON.stringify(a.type)),
      description: a.description,
      required: a.required ?? false,
      optional: a.optional ?? false,
      computed: a.computed ?? false,
      sensitive: a.sensitive ?? false,
      description_kind: 'PLAIN',
    })),
    block_types: block.blockTypes.map((n) => ({
      type_name: n.typeName,
      block: protoBlock(n.block),
      nesting: n.nesting,
      max_items: n.maxItems ?? 0,
    })),
    description_kind: 'PLAIN',
  };
}

function mapValues<T, U>(record: Record<string, T>, f: (v: T) => U): Record<string, U> {
  return Object.fromEntries(Object.entries(record).map(([k, v]) => [k, f(v)]));
}

const noCapabilities = {
  plan_destroy: false,
  get_provider_schema_optional: false,
  move_resource_state: false,
};

/**
 * The tfplugin6.Provider handlers. Unregistered RPCs (ephemeral resources,
 * functions, moves) are answered UNIMPLEMENTED by grpc-js.
 */
export class ProviderService {
  private store: ObjectStore | null = null;
  private stop = new AbortController();

  handlers(): grpc.UntypedServiceImplementation {
    const table: Record<string, (req: Request) => Promise<Response> | Response> = {
      GetMetadata: () => ({
        server_capabilities: noCapabilities,
        resources: Object.keys(RESOURCE_SCHEMAS).map((type_name) => ({ type_name })),
        data_sources: Object.keys(DATA_SOURCE_SCHEMAS).map((type_name) => ({ type_name })),
      }),
      GetProviderSchema: () => ({
        provider: protoSchema(PROVIDER_SCHEMA),
        resource_schemas: mapValues(RESOURCE_SCHEMAS, protoSchema),
        data_source_schemas: mapValues(DATA_SOURCE_SCHEMAS, protoSchema),
        server_capabilities: noCapabilities,
      }),
      GetFunctions: () => ({ functions: {} }),
      ValidateProviderConfig: (req) => {
        decodeValue(impliedType(PROVIDER_SCHEMA.block), req.config);
        return {};
      },
      ValidateResourceConfig: (req) => this.validateResource(req),
      ValidateDataResourceConfig: (req) => {
        const schema = dataSourceSchema(String(req.type_name));
        decodeValue(impliedType(schema.block), req.config);
        return {};
      },
      ConfigureProvider: (req) => {
        const config = decodeObject(impliedType(PROVIDER_SCHEMA.block), req.config);
        const dir = config?.state_dir;
        // A refusal repeating the value it was given, as real providers do.
        if (typeof dir === 'string' && statSync(dir, { throwIfNoEntry: false })?.isFile()) {
          throw new ProviderError('Invalid state_dir', `${dir} is a file, not a directory`);
        }
        this.store = new ObjectStore(
          typeof dir === 'string' ? dir : join(process.cwd(), 'kltest-objects'),
        );
        return {};
      },
      UpgradeResourceState: (req) => {
        const typeName = String(req.type_name);
        const raw = req.raw_state as { json?: Buffer } | null;
        if (!raw?.json || raw.json.length === 0) {
          throw new ProviderError('Legacy flatmap state is not supported');
        }
        const upgraded = upgradeState(typeName, Number(req.version), raw.json.toString());
        const type = impliedType(resourceSchema(typeName).block);
        return { upgraded_state: encodeValue(type, upgraded) };
      },
      ReadResource: async (req) => {
        const typeName = String(req.type_name);
        const type = impliedType(resourceSchema(typeName).block);
        const current = decodeObject(type, req.current_state);
        await this.readDelay();
        // A provider that dies mid-refresh, for crash tests: exits when asked to read this id.
        if (current !== null && current.id === process.env.KLTEST_CRASH_ON_READ) process.exit(2);
        const fresh = current === null ? null : readObject(this.configured(), typeName, current.id);
        return { new_state: encodeValue(type, fresh), private: req.private };
      },
      PlanResourceChange: (req) => {
        const typeName = String(req.type_name);
        const type = impliedType(resourceSchema(typeName).block);
        const { planned, requiresReplace } = planChange(
          typeName,
          decodeObject(type, req.prior_state),
          decodeObject(type, req.proposed_new_state),
        );
        return {
          planned_state: encodeValue(type, planned),
          requires_replace: requiresReplace.map((path) => ({
            steps: path.map((attribute_name) => ({ attribute_name })),
          })),
          planned_private: req.prior_private,
        };
      },
      ApplyResourceChange: (req) => {
        const typeName = String(req.type_name);
        const type = impliedType(resourceSchema(typeName).block);
        const applied = applyChange(
          this.configured(),
          typeName,
          decodeObject(type, req.prior_state),
          decodeObject(type, req.planned_state),
        );
        return { new_state: encodeValue(type, applied), private: req.planned_private };
      },
      ImportResourceState: (req) => {
        const typeName = String(req.type_name);
        const type = impliedType(resourceSchema(typeName).block);
        const found = importObject(this.configured(), typeName, String(req.id));
        return {
          imported_resources: [{ type_name: typeName, state: encodeValue(type, found) }],
        };
      },
      ReadDataSource: (req) => {
        const typeName = String(req.type_name);
        const type = impliedType(dataSourceSchema(typeName).block);
        const config = decodeObject(type, req.config);
        const state = readDataSource(this.configured(), typeName, config ?? {});
        return { state: encodeValue(type, state) };
      },
      StopProvider: () => {
        this.stop.abort();
        this.stop = new AbortController();
        return { Error: '' };
      },
    };
    return mapValues(table, (handler) => this.unary(handler));
  }

  private unary(
    handler: (req: Request) => Promise<Response> | Response,
  ): grpc.handleUnaryCall<Request, Response> {
    return (call, callback) => {
      const method = call.getPath().split('/').pop() ?? '?';
      logRpc(method);
      Promise.resolve()
        .then(() => handler(call.request))
        .then(
          (response) => callback(null, response),
          (error: unknown) => callback(null, { diagnostics: [diagnosticOf(error)] }),
        );
    };
  }

  private validateResource(req: Request): Response {
    const schema = resourceSchema(String(req.type_name));
    const config = decodeObject(impliedType(schema.block), req.config);
    const rules = config?.rule;
    const diagnostics = (Array.isArray(rules) ? rules : []).flatMap((rule, index) => {
      const port = (rule as CtyObject | null)?.port;
      if (typeof port !== 'number' || (port >= 1 && port <= 65535)) return [];
      return [
        {
          severity: 'ERROR',
          summary: 'Invalid port',
          detail: `port must be between 1 and 65535, got ${port}`,
          attribute: {
            steps: [
              { attribute_name: 'rule' },
              { element_key_int: index },
              { attribute_name: 'port' },
            ],
          },
        },
      ];
    });
    return { diagnostics };
  }

  private configured(): ObjectStore {
    if (!this.store) throw new ProviderError('Provider not configured');
    return this.store;
  }

  /** A slow remote API, interruptible by StopProvider, for cancellation tests. */
  private readDelay(): Promise<void> {
    const ms = Number(process.env.KLTEST_READ_DELAY_MS ?? 0);
    if (!(ms > 0)) return Promise.resolve();
    const signal = this.stop.signal;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(resolve, ms);
      signal.addEventListener('abort', () => {
        clearTimeout(timer);
        reject(new ProviderError('Read cancelled', 'the provider was asked to stop'));
      });
    });
  }
}

function diagnosticOf(error: unknown): Response {
  if (error instanceof ProviderError) {
    return { severity: 'ERROR', summary: error.summary, detail: error.detail };
  }
  const detail = error instanceof Error ? (error.stack ?? error.message) : String(error);
  return { severity: 'ERROR', summary: 'Internal error in the kltest provider', detail };
}

/** Lets tests see which RPCs Terraform actually made. */
export function logRpc(method: string): void {
  const file = process.env.KLTEST_RPC_LOG;
  if (file) appendFileSync(file, `${process.pid} ${method}\n`);
}
