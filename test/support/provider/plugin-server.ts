import { randomBytes } from 'node:crypto';
import { existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { createServerCertificate } from './auto-mtls';
import { logRpc, ProviderService } from './provider-service';

/** Terraform's go-plugin handshake cookie (not a secret). */
const MAGIC_COOKIE_KEY = 'TF_PLUGIN_MAGIC_COOKIE';
const MAGIC_COOKIE_VALUE = 'd602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2';
const CORE_PROTOCOL_VERSION = 1;
const APP_PROTOCOL_VERSION = 6;

export class PluginStartupError extends Error {}

/**
 * The plugin side of go-plugin: serve tfplugin6 plus go-plugin's own
 * services on a unix socket, then announce it on stdout.
 */
export async function servePlugin(env: NodeJS.ProcessEnv): Promise<void> {
  if (env[MAGIC_COOKIE_KEY] !== MAGIC_COOKIE_VALUE) {
    throw new PluginStartupError(
      'This binary is a Terraform plugin (terraform-provider-kltest). ' +
        'It is meant to be launched by Terraform, not executed directly.',
    );
  }
  const offered = (env.PLUGIN_PROTOCOL_VERSIONS ?? String(APP_PROTOCOL_VERSION)).split(',');
  if (!offered.map((v) => v.trim()).includes(String(APP_PROTOCOL_VERSION))) {
    throw new PluginStartupError(
      `kltest speaks plugin protocol ${APP_PROTOCOL_VERSION}; the host offered ${offered.join(',')}`,
    );
  }

  const packages = loadProtos();
  const server = new grpc.Server({ 'grpc.max_receive_message_length': 64 * 1024 * 1024 });
  const socketPath = join(
    env.PLUGIN_UNIX_SOCKET_DIR || tmpdir(),
    `plugin${randomBytes(5).toString('hex')}`,
  );
  let exiting = false;
  const exit = (code: number): void => {
    if (exiting) return;
    exiting = true;
    server.forceShutdown();
    rmSync(socketPath, { force: true });
    process.exit(code);
  };

  server.addService(packages.provider.service, new ProviderService().handlers());
  server.addService(packages.controller.service, {
    Shutdown: (_call: unknown, callback: grpc.sendUnaryData<object>) => {
      logRpc('GRPCController/Shutdown');
      callback(null, {});
      setImmediate(() => exit(0));
    },
  });
  server.addService(packages.stdio.service, {
    // Our logs go to the real stderr, so the stream stays open and silent.
    StreamStdio: () => logRpc('GRPCStdio/StreamStdio'),
  });
  server.addService(packages.broker.service, {
    StartStream: (call: grpc.ServerDuplexStream<unknown, unknown>) => {
      logRpc('GRPCBroker/StartStream');
      call.on('data', () => undefined);
      call.on('end', () => call.end());
    },
  });
  server.addService(healthService, {
    Check: (_call: unknown, callback: grpc.sendUnaryData<Buffer>) => {
      logRpc('Health/Check');
      callback(null, SERVING);
    },
  });

  const clientCert = env.PLUGIN_CLIENT_CERT;
  const serverCert = clientCert ? await createServerCertificate() : undefined;
  const credentials =
    clientCert && serverCert
      ? grpc.ServerCredentials.createSsl(
          Buffer.from(clientCert),
          [
            {
              private_key: Buffer.from(serverCert.keyPem),
              cert_chain: Buffer.from(serverCert.certPem),
            },
          ],
          true,
        )
      : grpc.ServerCredentials.createInsecure();

  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`unix:${socketPath}`, credentials, (error) =>
      error ? reject(error) : resolve(),
    ),
  );

  process.on('SIGINT', () => undefined); // Terraform cancels through StopProvider, like go-plugin.
  process.on('SIGTERM', () => exit(0));
  process.on('exit', () => rmSync(socketPath, { force: true }));
  watchParent(() => exit(0));

  process.stdout.write(
    [
      CORE_PROTOCOL_VERSION,
      APP_PROTOCOL_VERSION,
      'unix',
      socketPath,
      'grpc',
      serverCert?.handshakeField ?? '',
    ].join('|') + '\n',
  );
}

/** An orphaned provider would outlive a killed Terraform; Go providers share that flaw. */
function watchParent(onOrphaned: () => void): void {
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) onOrphaned();
  }, 500).unref();
}

const SERVING = Buffer.from([0x08, 0x01]);

/** grpc.health.v1 Check, hand-encoded: the answer is always SERVING. */
const healthService: grpc.ServiceDefinition = {
  Check: {
    path: '/grpc.health.v1.Health/Check',
    requestStream: false,
    responseStream: false,
    requestSerialize: (value: Buffer) => value,
    requestDeserialize: (bytes: Buffer) => bytes,
    responseSerialize: (value: Buffer) => value,
    responseDeserialize: (bytes: Buffer) => bytes,
  },
};

function loadProtos() {
  const protoDir = findProtoDir(__dirname);
  const definition = protoLoader.loadSync(
    ['tfplugin6.proto', 'grpc_controller.proto', 'grpc_stdio.proto', 'grpc_broker.proto'],
    { includeDirs: [protoDir], keepCase: true, longs: Number, enums: String, defaults: true },
  );
  const root = grpc.loadPackageDefinition(definition) as unknown as {
    tfplugin6: { Provider: grpc.ServiceClientConstructor };
    plugin: Record<string, grpc.ServiceClientConstructor>;
  };
  return {
    provider: root.tfplugin6.Provider,
    controller: root.plugin.GRPCController,
    stdio: root.plugin.GRPCStdio,
    broker: root.plugin.GRPCBroker,
  };
}

/** Works both from the TS sources and from the compiled copy under dist/. */
function findProtoDir(start: string): string {
  for (let dir = start; dir !== dirname(dir); dir = dirname(dir)) {
    const candidate = join(dir, 'proto');
    if (existsSync(join(candidate, 'tfplugin6.proto'))) return candidate;
  }
  throw new PluginStartupError(`proto/tfplugin6.proto not found above ${start}`);
}
