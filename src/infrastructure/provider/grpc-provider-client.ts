import * as path from 'node:path';
import { decodeMsgpack, encodeMsgpack } from '../../domain/cty/cty-codec';
import { CtyJson } from '../../domain/cty/cty-type';
import { Diagnostic, hasErrors } from '../../domain/cty/diagnostic';
import { blockType } from '../../domain/cty/implied-type';
import { ProviderSchema, SchemaBlock } from '../../domain/cty/schema';
import { stringifyJson } from '../../domain/terraform/lossless-json';
import { GrpcCallError, GrpcStatus, GrpcUnaryChannel } from './grpc-unary-channel';
import { PluginServices, pluginServices, ServiceMethods } from './plugin-protos';
import { startPlugin, StartedPlugin, StartPluginOptions } from './plugin-process';
import { bindingFor, ProtocolBinding } from './protocol-binding';
import {
  ImportedResource,
  ProviderClient,
  ReadResourceRequest,
  ReadResourceResult,
  StateValue,
  UpgradeResourceStateRequest,
} from './provider-client';
import { ProviderDiagnosticsError, ProviderError } from './provider-error';
import { toDiagnostics, toProviderSchema } from './wire-mapping';
import {
  WireDiagnosticsResponse,
  WireDynamicValue,
  WireGetSchemaResponse,
  WireImportResponse,
  WireReadResponse,
  WireStopResponse,
  WireUpgradeResponse,
} from './wire-types';

export interface LaunchProviderOptions extends StartPluginOptions {
  /** Deadline of each RPC except GetSchema. */
  callTimeoutMs?: number;
  /** GetSchema returns megabytes on big providers (4.7 MiB for AWS). */
  schemaTimeoutMs?: number;
  connectTimeoutMs?: number;
  /** How long close() waits for a graceful exit before SIGKILL. */
  shutdownGraceMs?: number;
}

// Terraform allows 64 MiB per message; the AWS schema alone is 4.7 MiB.
const MAX_MESSAGE_BYTES = 256 * 1024 * 1024;
const CONNECTION_LOST = new Set<number>([
  GrpcStatus.UNAVAILABLE,
  GrpcStatus.CANCELLED,
  GrpcStatus.INTERNAL,
  GrpcStatus.UNKNOWN,
]);
const CLIENT_CAPABILITIES = { deferral_allowed: false, write_only_attributes_allowed: true };

/** Starts the plugin, completes the handshake and connects over mTLS gRPC (HTTP/2). */
export async function launchProvider(
  binary: string,
  options: LaunchProviderOptions = {},
): Promise<ProviderClient> {
  const starting = startPlugin(binary, options);
  // The protocol's message types are built while the plugin starts (this process waits for
  // its handshake meanwhile), once the spawn is done: after the handshake, they were on the
  // way to the first call.
  const building = new Promise<PluginServices>((resolve, reject) =>
    setImmediate(() => {
      try {
        resolve(pluginServices());
      } catch (e) {
        reject(e as Error);
      }
    }),
  );
  building.catch(() => undefined); // a failed start is reported instead
  const plugin = await starting;
  const name = path.basename(binary);
  try {
    const binding = bindingFor(plugin.handshake.appProtocol);
    if (!binding) {
      throw new Error(
        `it speaks plugin protocol ${plugin.handshake.appProtocol}; only 5 and 6 are supported`,
      );
    }
    const services = await building;
    const { handshake, certificate } = plugin;
    const channel = await GrpcUnaryChannel.connect(
      {
        network: handshake.network,
        address: handshake.address,
        tls: handshake.serverCertPem
          ? { ca: handshake.serverCertPem, key: certificate.keyPem, cert: certificate.certPem }
          : null,
        maxMessageBytes: MAX_MESSAGE_BYTES,
      },
      options.connectTimeoutMs ?? 10_000,
    ).catch((e: Error) => {
      throw new Error(`gRPC connection not ready: ${e.message}`);
    });
    const methods = binding.version === 5 ? services.tfplugin5 : services.tfplugin6;
    return new GrpcProviderClient(
      name,
      plugin,
      binding,
      channel,
      methods,
      services.controller,
      options,
    );
  } catch (e) {
    await plugin.kill();
    if (e instanceof ProviderError) throw e;
    const tail = plugin.stderr.tailText();
    throw new ProviderError(
      'PROVIDER.START_FAILED',
      `provider ${name} did not start: ${(e as Error).message}${tail ? `\n--- plugin stderr (tail) ---\n${tail}` : ''}`,
      { binary, pid: plugin.child.pid, socketDir: plugin.socketDir, stderrTail: tail },
      { cause: e },
    );
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

function isStateValue(v: unknown): v is StateValue {
  return typeof v === 'object' && v !== null && (v as StateValue).msgpack instanceof Uint8Array;
}

class GrpcProviderClient implements ProviderClient {
  private schema: ProviderSchema | null = null;
  private closing: Promise<void> | null = null;
  private readonly callTimeoutMs: number;
  private readonly schemaTimeoutMs: number;
  private readonly graceMs: number;

  constructor(
    private readonly name: string,
    private readonly plugin: StartedPlugin,
    private readonly binding: ProtocolBinding,
    private readonly channel: GrpcUnaryChannel,
    private readonly methods: ServiceMethods,
    private readonly controller: ServiceMethods,
    options: LaunchProviderOptions,
  ) {
    this.callTimeoutMs = options.callTimeoutMs ?? 60_000;
    this.schemaTimeoutMs = options.schemaTimeoutMs ?? 120_000;
    this.graceMs = options.shutdownGraceMs ?? 2_000;
  }

  get protocolVersion(): number {
    return this.binding.version;
  }

  get pid(): number | undefined {
    return this.plugin.child.pid;
  }

  get socketDir(): string {
    return this.plugin.socketDir;
  }

  get exited(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    return this.plugin.exited;
  }

  async getSchema(): Promise<ProviderSchema> {
    const res = await this.call<WireGetSchemaResponse>(
      this.binding.getSchema,
      {},
      this.schemaTimeoutMs,
    );
    this.check(this.binding.getSchema, res.diagnostics);
    this.schema = toProviderSchema(res, this.binding.version);
    return this.schema;
  }

  useSchema(schema: ProviderSchema): void {
    this.schema = schema;
  }

  async configure(
    config: CtyJson,
    options: { terraformVersion?: string } = {},
  ): Promise<Diagnostic[]> {
    const schema = await this.currentSchema();
    const msgpack = encodeMsgpack(blockType(schema.provider.block), config);
    const res = await this.call<WireDiagnosticsResponse>(this.binding.configure, {
      terraform_version: options.terraformVersion ?? '1.11.4',
      config: { msgpack },
      client_capabilities: CLIENT_CAPABILITIES,
    });
    return this.check(this.binding.configure, res.diagnostics);
  }

  async upgradeResourceState(
    request: UpgradeResourceStateRequest,
  ): Promise<{ state: StateValue; diagnostics: Diagnostic[] }> {
    const block = await this.resourceBlock(request.typeName);
    const json =
      typeof request.rawState === 'string' ? request.rawState : stringifyJson(request.rawState);
    const res = await this.call<WireUpgradeResponse>('UpgradeResourceState', {
      type_name: request.typeName,
      version: String(request.version),
      raw_state: { json: Buffer.from(json) },
    });
    const diagnostics = this.check(`UpgradeResourceState(${request.typeName})`, res.diagnostics);
    return { state: this.decodeState(block, res.upgraded_state), diagnostics };
  }

  async readResource(request: ReadResourceRequest): Promise<ReadResourceResult> {
    const block = await this.resourceBlock(request.typeName);
    const current = isStateValue(request.currentState)
      ? request.currentState.msgpack
      : encodeMsgpack(blockType(block), request.currentState);
    const res = await this.call<WireReadResponse>('ReadResource', {
      type_name: request.typeName,
      current_state: { msgpack: current },
      private: request.private ?? Buffer.alloc(0),
      client_capabilities: CLIENT_CAPABILITIES,
    });
    const diagnostics = this.check(`ReadResource(${request.typeName})`, res.diagnostics);
    return {
      newState: this.decodeState(block, res.new_state),
      private: new Uint8Array(res.private ?? []),
      diagnostics,
      ...(res.deferred ? { deferred: res.deferred.reason } : {}),
    };
  }

  async importResourceState(
    typeName: string,
    id: string,
  ): Promise<{ resources: ImportedResource[]; diagnostics: Diagnostic[] }> {
    await this.resourceBlock(typeName);
    const res = await this.call<WireImportResponse>('ImportResourceState', {
      type_name: typeName,
      id,
      client_capabilities: CLIENT_CAPABILITIES,
    });
    const diagnostics = this.check(`ImportResourceState(${typeName})`, res.diagnostics);
    const resources = await Promise.all(
      res.imported_resources.map(async (r) => ({
        typeName: r.type_name,
        state: this.decodeState(await this.resourceBlock(r.type_name), r.state),
        private: new Uint8Array(r.private ?? []),
      })),
    );
    return { resources, diagnostics };
  }

  async stop(): Promise<void> {
    const res = await this.call<WireStopResponse>(this.binding.stop, {}, 10_000);
    if (res.Error) {
      throw new ProviderError(
        'PROVIDER.RPC_FAILED',
        `${this.name}: ${this.binding.stop} failed: ${res.Error}`,
      );
    }
  }

  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    if (!this.plugin.hasExited()) {
      await this.channel.unary(this.methods[this.binding.stop], {}, 5_000).catch(() => undefined);
      // go-plugin stops its server hard, so the reply rarely arrives; any outcome is fine.
      await this.channel.unary(this.controller.Shutdown, {}, 2_000).catch(() => undefined);
    }
    this.channel.close();
    await Promise.race([this.plugin.exited, delay(this.graceMs)]);
    await this.plugin.kill();
  }

  private async currentSchema(): Promise<ProviderSchema> {
    return this.schema ?? (await this.getSchema());
  }

  private async resourceBlock(typeName: string): Promise<SchemaBlock> {
    const schema = await this.currentSchema();
    const resource = Object.prototype.hasOwnProperty.call(schema.resourceSchemas, typeName)
      ? schema.resourceSchemas[typeName]
      : undefined;
    if (!resource) {
      throw new ProviderError(
        'PROVIDER.UNKNOWN_TYPE',
        `${this.name} has no resource type ${typeName}`,
        {
          typeName,
        },
      );
    }
    return resource.block;
  }

  private decodeState(block: SchemaBlock, wire: WireDynamicValue | null): StateValue {
    const msgpack = new Uint8Array(wire?.msgpack ?? []);
    if (msgpack.length === 0) return { value: null, msgpack };
    return { value: decodeMsgpack(blockType(block), msgpack), msgpack };
  }

  private check(operation: string, wire: WireDiagnosticsResponse['diagnostics']): Diagnostic[] {
    const diagnostics = toDiagnostics(wire);
    if (hasErrors(diagnostics))
      throw new ProviderDiagnosticsError(`${this.name}: ${operation}`, diagnostics);
    return diagnostics;
  }

  private async call<T>(
    method: string,
    request: object,
    timeoutMs = this.callTimeoutMs,
  ): Promise<T> {
    if (this.closing) throw new ProviderError('PROVIDER.CLOSED', `${this.name} is closed`);
    if (this.plugin.hasExited()) throw await this.crashed(method);
    try {
      return (await this.channel.unary(this.methods[method], request, timeoutMs)) as T;
    } catch (e) {
      const err = e as GrpcCallError;
      if (err.code === GrpcStatus.DEADLINE_EXCEEDED) {
        throw new ProviderError(
          'PROVIDER.TIMEOUT',
          `${this.name}: ${method} did not answer within ${timeoutMs} ms`,
          { method, timeoutMs },
          { cause: e },
        );
      }
      // A dropped connection is how a panicking provider shows up; give the exit a moment to land.
      if (CONNECTION_LOST.has(err.code)) await Promise.race([this.plugin.exited, delay(1_000)]);
      if (this.plugin.hasExited()) throw await this.crashed(method, e);
      throw new ProviderError(
        'PROVIDER.RPC_FAILED',
        `${this.name}: ${method} failed: ${err.details || err.message}`,
        { method, grpcCode: err.code },
        { cause: e },
      );
    }
  }

  private async crashed(method: string, cause?: unknown): Promise<ProviderError> {
    const { code, signal } = await this.plugin.exited;
    await this.plugin.kill();
    const tail = this.plugin.stderr.tailText();
    return new ProviderError(
      'PROVIDER.CRASHED',
      `${this.name} exited during ${method} (code ${code}, signal ${signal})${tail ? `\n--- plugin stderr (tail) ---\n${tail}` : ''}`,
      { method, exitCode: code, signal, stderrTail: tail },
      { cause },
    );
  }
}
