import { fixtureText } from './__fixtures__/fixtures';
import {
  buildDocument,
  contentMd5,
  documentMeta,
  flattenInstances,
  InstanceObjectV4,
  parseStateDocument,
  StateDocumentV4,
  stringifyJson,
} from '.';
import {
  instanceObjectText,
  stateDocumentBytes,
  stateDocumentText,
  stateDocumentTextPieces,
} from './state-document-text';

const FIXTURES = [
  'modules.v1.tfstate.txt',
  'modules.v2.tfstate.txt',
  'odd-keys.tfstate.txt',
  'deposed-tainted.tfstate.txt',
];

/** Values that stress the formatting: empty containers, big numbers, NUL, unknown members. */
const ODD = `{
  "version": 4, "terraform_version": "1.11.4", "serial": 3, "lineage": "l",
  "outputs": {}, "future_top": {"nested": [[], {}, [1, {"a": null}]]},
  "resources": [
    {"mode": "managed", "type": "t", "name": "empty", "provider": "p", "instances": []},
    {"module": "module.m[\\"k\\\\\\"q\\"]", "mode": "data", "type": "t", "name": "n",
     "provider": "p", "future_resource": {"x": 1}, "instances": [
      {"index_key": "a\\u0000b", "schema_version": 0, "attributes": {"big": 123456789012345678901234567890,
        "tiny": 1e-400, "e": [], "o": {}, "s": "line\\nbreak \\u2028 😀", "10": 1, "9": 2},
       "sensitive_attributes": [], "identity": {"arn": "x"}},
      {"index_key": 2, "schema_version": 1, "attributes_flat": {"a": "b"}}
    ]}
  ],
  "check_results": null
}`;

function documents(): [string, StateDocumentV4][] {
  return [
    ...FIXTURES.map((name): [string, StateDocumentV4] => [
      name,
      parseStateDocument(fixtureText(name)),
    ]),
    ['odd values', parseStateDocument(ODD)],
    [
      'no resources',
      parseStateDocument(
        '{"version":4,"terraform_version":"1","serial":0,"lineage":"","outputs":{},"resources":[]}',
      ),
    ],
  ];
}

describe('stateDocumentText', () => {
  it.each(documents())('is stringifyJson(doc, 2) plus a newline: %s', (_name, doc) => {
    const served = buildDocument(documentMeta(doc), flattenInstances(doc));
    for (const d of [doc, served]) {
      expect(stateDocumentText(d)).toBe(`${stringifyJson(d, 2)}\n`);
    }
  });

  it.each(documents())('is the same as bytes, from cached instance bytes too: %s', (_n, doc) => {
    const text = stateDocumentText(doc);
    expect(stateDocumentBytes(doc).toString('utf8')).toBe(text);
    const cache = new Map<InstanceObjectV4, Buffer>();
    const cached = (o: InstanceObjectV4) => {
      let bytes = cache.get(o);
      if (bytes === undefined) cache.set(o, (bytes = Buffer.from(instanceObjectText(o))));
      return bytes;
    };
    expect(stateDocumentBytes(doc, cached).equals(Buffer.from(text))).toBe(true);
    expect(cache.size).toBe(doc.resources.reduce((n, r) => n + r.instances.length, 0));
    expect(stateDocumentBytes(doc, cached).equals(Buffer.from(text))).toBe(true);
  });

  it('writes each instance with what the caller gives for it', () => {
    const doc = parseStateDocument(ODD);
    expect(stateDocumentBytes(doc, () => Buffer.from('"X"')).toString()).toContain(
      '"instances": [\n        "X",\n        "X"\n      ]',
    );
  });

  it('digests the UTF-8 bytes whether given text or bytes', () => {
    const text = stateDocumentText(parseStateDocument(ODD));
    expect(contentMd5(text)).toBe(contentMd5(Buffer.from(text, 'utf8')));
  });
});

describe('stateDocumentTextPieces', () => {
  it.each(documents())('is the same text however it is cut: %s', (_name, doc) => {
    const text = stateDocumentText(doc);
    for (const cut of [1, 7, 100, 4096, undefined]) {
      const pieces = [...stateDocumentTextPieces(doc, cut)];
      expect(pieces.join('')).toBe(text);
      // Each piece but the last holds at least `cut` characters.
      for (const piece of pieces.slice(0, -1)) expect(piece.length).toBeGreaterThanOrEqual(cut!);
    }
  });

  it('writes a big document in several pieces, exactly as one text', () => {
    const doc = buildDocument(
      {
        terraformVersion: '1.11.4',
        serial: 1,
        lineage: 'l',
        outputs: {},
        checkResults: null,
        extra: {},
      },
      Array.from({ length: 6_000 }, (_, i) => ({
        resource: {
          module: '',
          mode: 'managed' as const,
          type: 't',
          name: 'n',
          provider: 'p',
          each: 'list' as const,
        },
        instance: { index_key: i, schema_version: 0, attributes: { blob: 'b'.repeat(200) } },
      })),
    );
    const pieces = [...stateDocumentTextPieces(doc)];
    expect(pieces.length).toBeGreaterThan(1);
    expect(pieces.join('')).toBe(`${stringifyJson(doc, 2)}\n`);
  });
});
