import * as path from 'node:path';
import * as protobuf from 'protobufjs';

/** The .proto files of the plugin protocol kl speaks to providers, in `proto/`. */
export const PLUGIN_PROTO_FILES = ['tfplugin5.proto', 'tfplugin6.proto', 'grpc_controller.proto'];

/** The descriptor parsed from PLUGIN_PROTO_FILES, in `proto/` beside them. */
export const PLUGIN_DESCRIPTOR_FILE = 'plugin-descriptor.json';

/**
 * The plugin protocol's messages and services parsed from the .proto files in
 * `dir`, as protobufjs's JSON descriptor. Field names are kept as written
 * (Stop.Response has a field literally named `Error`); google/protobuf
 * imports are protobufjs's bundled copies. Only scripts/plugin-descriptor.mjs
 * (which writes proto/plugin-descriptor.json) and the test that checks that
 * file is current use this: kl itself loads the JSON, not the .proto text.
 */
export function parsePluginProtos(dir: string): protobuf.INamespace {
  const root = new protobuf.Root().loadSync(
    PLUGIN_PROTO_FILES.map((f) => path.join(dir, f)),
    { keepCase: true },
  );
  root.resolveAll();
  return root.toJSON();
}
