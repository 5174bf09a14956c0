import * as fs from 'node:fs';
import * as path from 'node:path';
import { inspect as nodeInspect } from 'node:util';
import * as protoLoader from '@grpc/proto-loader';
import {
  PLUGIN_DESCRIPTOR_FILE,
  PLUGIN_PROTO_FILES,
  parsePluginProtos,
} from './plugin-proto-files';
import { pluginServices, protoDir, ServiceMethods } from './plugin-protos';
import { decodeReadResponse, encodeReadRequest } from './read-resource-wire';
import {
  fuzzSeeds,
  seededRandom,
  SeededRandom,
  withSeed,
} from '../../../test/support/seeded-random';

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

/**
 * ReadResource's request and response are written and read without
 * protobufjs (read-resource-wire.ts): the bytes sent and the objects read must
 * be exactly @grpc/proto-loader's, for every shape either side may give.
 */
describe('ReadResource on the wire', () => {
  // The whole object with every byte: jest's toEqual walks a Buffer element by element.
  const inspect = (value: unknown): string =>
    nodeInspect(value, { depth: null, maxArrayLength: null, breakLength: Infinity, sorted: true });
  const reference = fromProtoText();
  const actual = pluginServices();
  const protocols = ['tfplugin5', 'tfplugin6'] as const;

  const bytes = (r: SeededRandom, max: number): Buffer =>
    Buffer.from(Array.from({ length: r.int(max + 1) }, () => r.int(256)));
  // Lengths that take one, two and three bytes of varint.
  const someBytes = (r: SeededRandom): Buffer => bytes(r, r.pick([0, 3, 127, 300, 16_400]));

  const plainRequest = (r: SeededRandom): Record<string, unknown> => ({
    type_name: r.pick(['kltest_item', 'aws_ssm_parameter', '', 'é_ünïcode_☃']),
    current_state: { msgpack: someBytes(r) },
    ...(r.chance(0.7) ? { private: r.chance(0.3) ? Buffer.alloc(0) : someBytes(r) } : {}),
    ...(r.chance(0.8)
      ? {
          client_capabilities: {
            deferral_allowed: r.chance(0.5),
            write_only_attributes_allowed: r.chance(0.5),
          },
        }
      : {}),
  });

  it.each(fuzzSeeds([1, 2, 3, 4, 5, 6, 7, 8]))(
    'writes a read request as protobufjs does (seed %i)',
    (seed) =>
      withSeed(seed, () => {
        const r = seededRandom(seed);
        for (let i = 0; i < 50; i++) {
          const request = plainRequest(r);
          const direct = encodeReadRequest(request);
          expect(direct).toBeDefined();
          for (const protocol of protocols) {
            const expected = reference[protocol].ReadResource.requestSerialize(request);
            // Buffer#equals: jest's toEqual walks a Buffer element by element.
            expect(direct?.equals(expected)).toBe(true);
            expect(actual[protocol].ReadResource.requestSerialize(request).equals(expected)).toBe(
              true,
            );
          }
        }
      }),
  );

  it('leaves any other request to protobufjs, with the same bytes', () => {
    const state = { msgpack: Buffer.from([0x80]) };
    for (const request of [
      { type_name: 't', current_state: state, provider_meta: { msgpack: Buffer.from([0xc0]) } },
      { type_name: 't', current_state: { ...state, json: Buffer.from('{}') } },
      { type_name: 't', current_state: { json: Buffer.from('{}') } },
      { type_name: 't' },
      { type_name: 't', current_state: state, private: 'cA==' },
      { type_name: 't', current_state: state, client_capabilities: { deferral_allowed: true } },
    ]) {
      expect(encodeReadRequest(request)).toBeUndefined();
      for (const protocol of protocols) {
        expect(actual[protocol].ReadResource.requestSerialize(request)).toEqual(
          reference[protocol].ReadResource.requestSerialize(request),
        );
      }
    }
  });

  const response = (r: SeededRandom): Record<string, unknown> => ({
    ...(r.chance(0.85)
      ? {
          new_state: {
            ...(r.chance(0.9) ? { msgpack: someBytes(r) } : {}),
            ...(r.chance(0.2) ? { json: someBytes(r) } : {}),
          },
        }
      : {}),
    ...(r.chance(0.7) ? { private: someBytes(r) } : {}),
    ...(r.chance(0.15)
      ? { diagnostics: [{ severity: 'WARNING', summary: 'careful', detail: 'd' }] }
      : {}),
    ...(r.chance(0.1) ? { deferred: { reason: 'PROVIDER_CONFIG_UNKNOWN' } } : {}),
  });

  it.each(fuzzSeeds([11, 12, 13, 14, 15, 16, 17, 18]))(
    'reads every answer as protobufjs does (seed %i)',
    (seed) =>
      withSeed(seed, () => {
        const r = seededRandom(seed);
        for (let i = 0; i < 50; i++) {
          const value = response(r);
          for (const protocol of protocols) {
            const encoded = reference[protocol].ReadResource.responseSerialize(value);
            const expected = reference[protocol].ReadResource.responseDeserialize(encoded);
            expect(inspect(actual[protocol].ReadResource.responseDeserialize(encoded))).toBe(
              inspect(expected),
            );
            // The usual answer (a state and private bytes) is read directly.
            const plain = !('diagnostics' in value) && !('deferred' in value);
            expect(decodeReadResponse(encoded) !== undefined).toBe(plain);
          }
        }
      }),
  );

  it('refuses a cut or foreign answer as protobufjs does', () => {
    const value = { new_state: { msgpack: Buffer.alloc(300, 7) }, private: Buffer.from('p') };
    for (const protocol of protocols) {
      const whole = reference[protocol].ReadResource.responseSerialize(value);
      const broken = [
        ...Array.from({ length: whole.length - 1 }, (_, n) => whole.subarray(0, n + 1)),
        Buffer.concat([whole, Buffer.from([0x0a, 0x05, 0x0a])]), // new_state given twice, cut
        Buffer.from([0x0a, 0x02, 0x08, 0x01]), // a varint where DynamicValue has bytes
      ];
      for (const bytes of broken) {
        const outcome = (decode: (b: Buffer) => unknown): unknown => {
          try {
            return decode(bytes);
          } catch {
            return 'refused';
          }
        };
        expect(outcome(actual[protocol].ReadResource.responseDeserialize)).toEqual(
          outcome(reference[protocol].ReadResource.responseDeserialize),
        );
      }
    }
  });
});
