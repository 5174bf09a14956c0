import * as fs from 'node:fs';
import * as path from 'node:path';
import * as protoLoader from '@grpc/proto-loader';
import { UnaryMethod } from './grpc-unary-channel';

/** The methods of one service, by name (`ReadResource`, `Shutdown`, ...). */
export type ServiceMethods = Record<string, UnaryMethod>;

export interface PluginServices {
  tfplugin5: ServiceMethods;
  tfplugin6: ServiceMethods;
  controller: ServiceMethods;
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

/** Each plugin service's methods: path and (de)serialisers, as @grpc/proto-loader builds them. */
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
  const service = (name: string): ServiceMethods => definition[name] as unknown as ServiceMethods;
  loaded = {
    tfplugin5: service('tfplugin5.Provider'),
    tfplugin6: service('tfplugin6.Provider'),
    controller: service('plugin.GRPCController'),
  };
  return loaded;
}
