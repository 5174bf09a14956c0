import * as fs from 'node:fs';
import * as path from 'node:path';
import * as protoLoader from '@grpc/proto-loader';
import {
  PLUGIN_DESCRIPTOR_FILE,
  PLUGIN_PROTO_FILES,
  parsePluginProtos,
} from './plugin-proto-files';
import { pluginServices, protoDir, ServiceMethods } from './plugin-protos';

/**
 * kl builds the plugin protocol's (de)serialisers from a descriptor parsed at
 * build time: it must be the .proto files' current one, and what it builds
 * must speak exactly as @grpc/proto-loader's parse of the .proto files does.
 */

const dir = protoDir();

/** What kl did before the descriptor: @grpc/proto-loader over the .proto text. */
function fromProtoText(): Record<string, ServiceMethods> {
  const definition = protoLoader.loadSync(
    PLUGIN_PROTO_FILES.map((f) => path.join(dir, f)),
    {
      includeDirs: [dir],
      keepCase: true,
      longs: String,
      enums: String,
      defaults: true,
      oneofs: true,
    },
  );
  const service = (name: string) => definition[name] as unknown as ServiceMethods;
  return {
    tfplugin5: service('tfplugin5.Provider'),
    tfplugin6: service('tfplugin6.Provider'),
    controller: service('plugin.GRPCController'),
  };
}

describe('plugin protocol descriptor', () => {
  it('proto/plugin-descriptor.json is the parse of the .proto files (else: npm run protos)', () => {
    const kept: unknown = JSON.parse(
      fs.readFileSync(path.join(dir, PLUGIN_DESCRIPTOR_FILE), 'utf8'),
    );
    expect(kept).toEqual(JSON.parse(JSON.stringify(parsePluginProtos(dir))));
  });

  it('has every method of every service, at the same path as the .proto files give', () => {
    const expected = fromProtoText();
    const actual = pluginServices();
    for (const service of ['tfplugin5', 'tfplugin6', 'controller'] as const) {
      const paths = (methods: ServiceMethods) =>
        Object.entries(methods).map(([name, m]) => [name, m.path]);
      expect(paths(actual[service])).toEqual(paths(expected[service]));
    }
    expect(actual.tfplugin6.ReadResource.path).toBe('/tfplugin6.Provider/ReadResource');
    expect(actual.controller.Shutdown.path).toBe('/plugin.GRPCController/Shutdown');
  });

  it('encodes and decodes messages byte for byte as @grpc/proto-loader does', () => {
    const expected = fromProtoText().tfplugin6;
    const actual = pluginServices().tfplugin6;
    // Nested messages, bytes, a map, an int64, enums and a repeated field.
    const request = {
      type_name: 'kltest_item',
      current_state: { msgpack: Buffer.from([0x81, 0xa2, 0x69, 0x64, 0x01]) },
      private: Buffer.from('p'),
      provider_meta: { json: Buffer.from('{}') },
    };
    const schema = {
      provider: { version: '7', block: { version: '9007199254740993', attributes: [] } },
      resource_schemas: {
        kltest_item: { version: '2', block: { description_kind: 'MARKDOWN', deprecated: true } },
      },
      diagnostics: [{ severity: 'WARNING', summary: 'careful', detail: 'd' }],
    };
    for (const [method, value] of [
      ['ReadResource', request],
      ['GetProviderSchema', schema],
    ] as const) {
      const ours = actual[method];
      const theirs = expected[method];
      const requestBytes = ours.requestSerialize(value);
      expect(requestBytes).toEqual(theirs.requestSerialize(value));
      expect(ours.requestDeserialize(requestBytes)).toEqual(
        theirs.requestDeserialize(requestBytes),
      );
      const responseBytes = ours.responseSerialize(value);
      expect(responseBytes).toEqual(theirs.responseSerialize(value));
      const decoded = ours.responseDeserialize(responseBytes);
      expect(decoded).toEqual(theirs.responseDeserialize(responseBytes));
      if (method === 'GetProviderSchema') {
        // Longs as exact strings, enums by name: what the provider client reads.
        expect(decoded).toMatchObject({
          provider: { block: { version: '9007199254740993' } },
          diagnostics: [{ severity: 'WARNING' }],
        });
      }
    }
  });
});
