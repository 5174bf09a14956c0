import * as fs from 'node:fs';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

export interface PluginServices {
  tfplugin5: grpc.ServiceClientConstructor;
  tfplugin6: grpc.ServiceClientConstructor;
  controller: grpc.ServiceClientConstructor;
}

let loaded: PluginServices | null = null;

/** The repository's `proto/` folder, found from here both in `src/` and in `dist/src/`. */
export function protoDir(): string {
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'proto');
    if (fs.existsSync(path.join(candidate, 'tfplugin5.proto'))) return candidate;
    if (path.dirname(dir) === dir)
      throw new Error(`proto/tfplugin5.proto not found above ${__dirname}`);
  }
}

export function pluginServices(): PluginServices {
  if (loaded) return loaded;
  const dir = protoDir();
  const definition = protoLoader.loadSync(
    ['tfplugin5.proto', 'tfplugin6.proto', 'grpc_controller.proto'].map((f) => path.join(dir, f)),
    // keepCase: Stop.Response has a field literally named `Error`.
    {
      includeDirs: [dir],
      keepCase: true,
      longs: String,
      enums: String,
      defaults: true,
      oneofs: true,
    },
  );
  const root = grpc.loadPackageDefinition(definition);
  const service = (pkg: string, name: string): grpc.ServiceClientConstructor => {
    const ns = root[pkg] as grpc.GrpcObject;
    return ns[name] as grpc.ServiceClientConstructor;
  };
  loaded = {
    tfplugin5: service('tfplugin5', 'Provider'),
    tfplugin6: service('tfplugin6', 'Provider'),
    controller: service('plugin', 'GRPCController'),
  };
  return loaded;
}
