import { InstanceObjectV4, parseJsonExact } from '../../domain/terraform';
import { instanceTexts } from './instance-texts';

/** Instances as read back from the log: members in the order written, big numbers marked. */
function parsed(json: string): InstanceObjectV4 {
  return parseJsonExact(json) as unknown as InstanceObjectV4;
}

const INSTANCES: [string, InstanceObjectV4][] = [
  ['no members', parsed('{}')],
  ['attributes alone', parsed('{"attributes":{"a":1}}')],
  [
    'members before and after the attributes, keys and texts JSON escapes',
    parsed(
      '{"index_key":"k\\"q\\\\","status":"tainted","deposed":"d\\u0000","schema_version":3,' +
        '"attributes":{"s":"é\\u0000\\ud800 \\u2028 \\"x\\"","n":123456789012345678901234,' +
        '"e":1e400,"k\\tey":[1,2.5,{"z":null}]},' +
        '"sensitive_attributes":[[{"type":"get_attr","value":"s"}]],"private":"cHJpdg==",' +
        '"dependencies":["a.b","c.d[\\"x\\"]"],"create_before_destroy":true,"new\\nmember":{"x":1}}',
    ),
  ],
  [
    'attributes last',
    parsed('{"schema_version":0,"sensitive_attributes":[],"attributes":{"id":"x"}}'),
  ],
  ['attributes null', parsed('{"schema_version":0,"attributes":null,"dependencies":[]}')],
  [
    'no attributes',
    parsed('{"schema_version":0,"attributes_flat":{"id":"x"},"dependencies":["a"]}'),
  ],
  [
    'integer-like keys, which enumerate first, and an own __proto__',
    parsed('{"2":"two","attributes":{"b":"\\u00e9"},"__proto__":{"p":1},"1":"one"}'),
  ],
  [
    'undefined members, which JSON leaves out',
    {
      schema_version: 0,
      private: undefined,
      attributes: { id: 'x' },
      dependencies: undefined,
    } as unknown as InstanceObjectV4,
  ],
];

describe('instanceTexts', () => {
  it.each(INSTANCES)(
    'gives the JSON text of the instance and of its jsonb members: %s',
    (_name, instance) => {
      const texts = instanceTexts(instance);
      expect(texts.instance).toBe(JSON.stringify(instance));
      for (const key of ['attributes', 'sensitive_attributes', 'dependencies'] as const) {
        expect(texts[key]).toBe(JSON.stringify(instance[key]));
      }
    },
  );

  it('finds the attributes in the whole text whatever the widths of the members around them', () => {
    for (let before = 0; before < 40; before += 7) {
      for (let after = 0; after < 40; after += 9) {
        const instance = parsed(
          JSON.stringify({
            index_key: 'é'.repeat(before),
            attributes: { v: '"'.repeat(after), w: [before, after] },
            private: '\\'.repeat(after),
          }),
        );
        expect(instanceTexts(instance).attributes).toBe(JSON.stringify(instance.attributes));
      }
    }
  });
});
