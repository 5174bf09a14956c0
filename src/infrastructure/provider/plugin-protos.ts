import * as fs from 'node:fs';
import * as path from 'node:path';
// The light build: reflection, encode/decode and toObject/fromObject, without
// the .proto parser (kl reads the parsed descriptor instead).
import * as protobuf from 'protobufjs/light';
import { UnaryMethod } from './grpc-unary-channel';

/**
 * One method as @grpc/proto-loader describes it (a @grpc/grpc-js server
 * accepts a service made of these, as the tests' stub providers use).
 */
export interface PluginMethod extends UnaryMethod {
  requestStream: boolean;
  responseStream: boolean;
  requestDeserialize(bytes: Buffer): unknown;
  responseSerialize(value: object): Buffer;
}

/** The methods of one service, by name (`ReadResource`, `Shutdown`, ...). */
export type ServiceMethods = Record<string, PluginMethod>;

export interface PluginServices {
  tfplugin5: ServiceMethods;
  tfplugin6: ServiceMethods;
  controller: ServiceMethods;
}

/**
 * How messages become objects: names as in the .proto, 64-bit numbers and
 * enums as strings, defaults filled in, the set field of each oneof named.
 */
const TO_OBJECT: protobuf.IConversionOptions = {
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
};

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

/**
 * Each plugin service's methods: path and (de)serialisers, built from
 * proto/plugin-descriptor.json (the .proto files parsed at build time by
 * scripts/plugin-descriptor.mjs). Parsing the .proto text with
 * @grpc/proto-loader cost every `kl refresh` ~40 ms of CPU at start
 * (docs/performance-history.md, "kl start-up (wave 9)"); the (de)serialisers are the
 * ones proto-loader builds, over the same protobufjs types.
 */
export function pluginServices(): PluginServices {
  if (loaded) return loaded;
  const descriptor = fs.readFileSync(path.join(protoDir(), 'plugin-descriptor.json'), 'utf8');
  const root = protobuf.Root.fromJSON(JSON.parse(descriptor) as protobuf.INamespace);
  root.resolveAll();
  loaded = {
    tfplugin5: serviceMethods(root, 'tfplugin5.Provider'),
    tfplugin6: serviceMethods(root, 'tfplugin6.Provider'),
    controller: serviceMethods(root, 'plugin.GRPCController'),
  };
  return loaded;
}

function serviceMethods(root: protobuf.Root, name: string): ServiceMethods {
  const methods: ServiceMethods = {};
  for (const method of root.lookupService(name).methodsArray) {
    const request = method.resolvedRequestType!;
    const response = method.resolvedResponseType!;
    methods[method.name] = {
      path: `/${name}/${method.name}`,
      requestStream: method.requestStream === true,
      responseStream: method.responseStream === true,
      requestSerialize: serializer(request),
      requestDeserialize: deserializer(request),
      responseSerialize: serializer(response),
      responseDeserialize: deserializer(response),
    };
  }
  return methods;
}

function serializer(type: protobuf.Type): (value: object) => Buffer {
  // Under Node protobufjs writes into a Buffer: no copy of a large message.
  return (value) => type.encode(type.fromObject(value)).finish() as Buffer;
}

function deserializer(type: protobuf.Type): (bytes: Buffer) => unknown {
  return (bytes) => type.toObject(type.decode(bytes), TO_OBJECT);
}
