import { DomainError } from '../shared/domain-error';
import { JsonObject } from './json-value';
import {
  parseStateDocument,
  ReusedInstances,
  validateReusingDocument,
  validateStateDocument,
} from './parse-state-document';
import { InstanceObjectV4, StateDocumentV4 } from './state-document';

function validDocument(): JsonObject {
  return {
    version: 4,
    terraform_version: '1.11.4',
    serial: 3,
    lineage: 'a6b7c8',
    outputs: { url: { value: 'https://x', type: 'string' } },
    resources: [
      {
        mode: 'managed',
        type: 'terraform_data',
        name: 'a',
        provider: 'provider["terraform.io/builtin/terraform"]',
        instances: [{ schema_version: 0, attributes: { id: '1' }, sensitive_attributes: [] }],
      },
      {
        module: 'module.m[0]',
        mode: 'data',
        type: 'terraform_remote_state',
        name: 'r',
        provider: 'provider["terraform.io/builtin/terraform"]',
        instances: [
          { index_key: 0, schema_version: 1, attributes_flat: { id: '2' } },
          { index_key: 1, schema_version: 1, attributes: {}, status: 'tainted' },
        ],
      },
    ],
    check_results: null,
  };
}

function errorOf(run: () => unknown): DomainError {
  try {
    run();
  } catch (e) {
    if (e instanceof DomainError) return e;
    throw e;
  }
  throw new Error('expected a DomainError');
}

describe('parseStateDocument', () => {
  it('accepts JSON text and decoded objects alike', () => {
    const doc = validDocument();
    expect(parseStateDocument(JSON.stringify(doc))).toEqual(doc);
    expect(parseStateDocument(doc)).toEqual(doc);
  });

  it('keeps unknown members at every level', () => {
    const doc = validDocument();
    doc.tofu_extension = { encrypted: false };
    const resources = doc.resources as JsonObject[];
    resources[0].future_field = 'kept';
    (resources[0].instances as JsonObject[])[0].identity = { id: 'abc' };
    (resources[0].instances as JsonObject[])[0].identity_schema_version = 0;
    const parsed = parseStateDocument(JSON.stringify(doc));
    expect(parsed.tofu_extension).toEqual({ encrypted: false });
    expect(parsed.resources[0].future_field).toBe('kept');
    expect(parsed.resources[0].instances[0].identity).toEqual({ id: 'abc' });
  });

  it('accepts a state written before check_results existed', () => {
    const doc = validDocument();
    delete doc.check_results;
    expect(() => parseStateDocument(doc)).not.toThrow();
  });

  type Mutation = (doc: JsonObject) => void;
  const resource = (doc: JsonObject, i: number) => (doc.resources as JsonObject[])[i];
  const instance = (doc: JsonObject, i: number, j: number) =>
    (resource(doc, i).instances as JsonObject[])[j];

  it.each<[string, Mutation]>([
    ['state is not valid JSON', () => undefined],
    ['version must be 4 (got 3)', (d) => (d.version = 3)],
    ['version is required', (d) => delete d.version],
    ['serial must be a non-negative integer', (d) => (d.serial = -1)],
    ['serial must be a non-negative integer', (d) => (d.serial = 1.5)],
    ['serial must be a non-negative integer', (d) => (d.serial = '4')],
    ['lineage must be a string', (d) => delete d.lineage],
    ['terraform_version must be a string', (d) => (d.terraform_version = 1)],
    ['outputs must be an object', (d) => (d.outputs = [])],
    ['outputs.url.value is required', (d) => (d.outputs = { url: { type: 'string' } })],
    ['outputs["my output"] must be an object', (d) => (d.outputs = { 'my output': 1 })],
    ['resources must be an array', (d) => (d.resources = {})],
    ['resources[1] must be an object', (d) => ((d.resources as JsonObject[])[1] = [] as never)],
    ['resources[0].mode must be "managed" or "data"', (d) => (resource(d, 0).mode = 'other')],
    ['resources[1].type must be a non-empty string', (d) => (resource(d, 1).type = '')],
    ['resources[0].name must be a non-empty string', (d) => delete resource(d, 0).name],
    ['resources[0].provider must be a non-empty string', (d) => delete resource(d, 0).provider],
    ['resources[0].each must be "list" or "map"', (d) => (resource(d, 0).each = 'set')],
    ['resources[1].module must be a module path', (d) => (resource(d, 1).module = 'mod.x')],
    ['resources[0].instances must be an array', (d) => delete resource(d, 0).instances],
    [
      'resources[1].instances[0].schema_version must be an integer',
      (d) => (instance(d, 1, 0).schema_version = '1'),
    ],
    [
      'resources[1].instances[1].schema_version must not be negative',
      (d) => (instance(d, 1, 1).schema_version = -1),
    ],
    [
      'resources[1].instances[0].index_key must be a non-negative integer or a string',
      (d) => (instance(d, 1, 0).index_key = true),
    ],
    [
      'resources[0].instances[0] must have attributes or attributes_flat',
      (d) => delete instance(d, 0, 0).attributes,
    ],
    [
      'resources[0].instances[0].attributes must be an object',
      (d) => (instance(d, 0, 0).attributes = 'x'),
    ],
    [
      'resources[1].instances[0].attributes_flat.id must be a string',
      (d) => (instance(d, 1, 0).attributes_flat = { id: 2 }),
    ],
    [
      'resources[1].instances[1].status must be "tainted"',
      (d) => (instance(d, 1, 1).status = 'ready'),
    ],
    [
      'resources[0].instances[0].dependencies[1] must be a string',
      (d) => (instance(d, 0, 0).dependencies = ['a.b', 3]),
    ],
    [
      'resources[0].instances[0].sensitive_attributes must be an array',
      (d) => (instance(d, 0, 0).sensitive_attributes = {}),
    ],
    [
      'resources[1].instances[1] repeats the address module.m[0].data.terraform_remote_state.r[0]',
      (d) => (instance(d, 1, 1).index_key = 0),
    ],
    ['check_results must be an array or null', (d) => (d.check_results = 'x')],
  ])('rejects with "%s"', (message, mutate) => {
    const doc = validDocument();
    mutate(doc);
    const input = message.includes('not valid JSON') ? '{"version":4,' : JSON.stringify(doc);
    const error = errorOf(() => parseStateDocument(input));
    expect(error.code).toBe('STATE.INVALID');
    expect(error.message).toContain(message);
  });

  it('rejects decoded values that are not plain JSON, naming where', () => {
    const doc = validDocument();
    instance(doc, 0, 0).attributes = { size: 10n } as never;
    const error = errorOf(() => parseStateDocument(doc));
    expect(error.code).toBe('STATE.INVALID');
    expect(error.message).toBe('resources[0].instances[0].attributes.size is not plain JSON');
  });

  describe('values PostgreSQL could not store or index', () => {
    const long = (n: number) => 'x'.repeat(n);
    it.each<[string, Mutation]>([
      ['lineage holds a NUL character', (d) => (d.lineage = 'a\u0000b')],
      ['terraform_version holds a NUL character', (d) => (d.terraform_version = '1.11\u0000')],
      ['lineage holds an unpaired UTF-16 surrogate', (d) => (d.lineage = 'a\ud800b')],
      [
        'outputs["a\\u0000"] holds a NUL character',
        (d) => (d.outputs = { 'a\u0000': { value: 1 } }),
      ],
      ['resources[0].type holds a NUL character', (d) => (resource(d, 0).type = 't\u0000')],
      ['resources[0].name holds a NUL character', (d) => (resource(d, 0).name = 'n\u0000')],
      ['resources[0].provider holds a NUL character', (d) => (resource(d, 0).provider = 'p\u0000')],
      [
        'resources[1].module holds a NUL character',
        (d) => (resource(d, 1).module = 'module.m\u0000'),
      ],
      [
        'resources[0].instances[0].deposed holds a NUL character',
        (d) => (instance(d, 0, 0).deposed = 'ab\u0000'),
      ],
      [
        'resources[0].instances[0].private holds a NUL character',
        (d) => (instance(d, 0, 0).private = 'x\u0000'),
      ],
      [
        'resources[0].instances[0].dependencies[0] holds a NUL character',
        (d) => (instance(d, 0, 0).dependencies = ['a.b\u0000']),
      ],
      [
        'resources[0].instances[0].dependencies[0] is longer than 800 bytes',
        (d) => (instance(d, 0, 0).dependencies = [long(801)]),
      ],
      [
        'resources[0].instances[0].schema_version must be at most 2147483647',
        (d) => (instance(d, 0, 0).schema_version = 2 ** 31),
      ],
      [
        'resources[1].instances[0] has an address longer than 800 bytes',
        (d) => (instance(d, 1, 0).index_key = long(760)),
      ],
      ['resources[0].name is longer than 800 bytes', (d) => (resource(d, 0).name = long(900))],
      [
        'resources[0].instances[0].attributes.id holds an unpaired UTF-16 surrogate',
        (d) => (instance(d, 0, 0).attributes = { id: '\udc00' }),
      ],
      [
        'outputs.url.value is a number PostgreSQL cannot store',
        (d) => (d.outputs = { url: { value: 'BIG' } }),
      ],
      ['state nests deeper than 1000 levels', (d) => (d.outputs = { url: { value: 'DEEP' } })],
    ])('rejects with "%s"', (message, mutate) => {
      const doc = validDocument();
      mutate(doc);
      const text = JSON.stringify(doc)
        .replace('"BIG"', '1e200000')
        .replace('"DEEP"', '['.repeat(1000) + ']'.repeat(1000));
      const error = errorOf(() => parseStateDocument(text));
      expect(error.code).toBe('STATE.INVALID');
      expect(error.message).toContain(message);
    });

    it('keeps NUL in attributes, outputs and for_each keys, exactly', () => {
      const doc = validDocument();
      doc.outputs = { url: { value: 'a\u0000b', type: 'string' } };
      instance(doc, 0, 0).attributes = { 'k\u0000': 'v\u0000' };
      instance(doc, 1, 0).index_key = 'key\u0000';
      expect(parseStateDocument(JSON.stringify(doc))).toEqual(doc);
    });

    it('keeps surrogate pairs, escaped or not, and numbers up to what PostgreSQL holds', () => {
      const text = JSON.stringify(validDocument()).replace(
        '"https://x"',
        '["\\ud83d\\ude00", "😀", 1e131071, -1e-16383, 1e400, 18446744073709551616]',
      );
      const value = (parseStateDocument(text).outputs.url.value as string[]).slice(0, 2);
      expect(value).toEqual(['😀', '😀']);
    });

    it('accepts nesting of exactly 1000 levels, not 1001', () => {
      // The document, outputs and url objects are three levels.
      const nested = (arrays: number) =>
        JSON.stringify(validDocument()).replace(
          '"https://x"',
          '['.repeat(arrays) + ']'.repeat(arrays),
        );
      expect(() => parseStateDocument(nested(997))).not.toThrow();
      expect(errorOf(() => parseStateDocument(nested(998))).message).toBe(
        'state nests deeper than 1000 levels',
      );
    });
  });

  it('rejects a root that is not an object', () => {
    expect(errorOf(() => parseStateDocument('[]')).message).toBe('state must be an object');
  });
});

describe('validateReusingDocument', () => {
  type Resource = { name: string; instances: InstanceObjectV4[] };
  const instance = (key: number, id: string): InstanceObjectV4 => ({
    index_key: key,
    schema_version: 0,
    attributes: { id },
  });
  const doc = (resources: Resource[]): JsonObject =>
    ({
      version: 4,
      terraform_version: '1.11.4',
      serial: 1,
      lineage: 'l',
      outputs: {},
      resources: resources.map((r) => ({
        mode: 'managed',
        type: 'terraform_data',
        name: r.name,
        provider: 'provider["terraform.io/builtin/terraform"]',
        instances: r.instances,
      })),
    }) as unknown as JsonObject;
  const objectsOf = (d: JsonObject) =>
    (d as unknown as StateDocumentV4).resources.flatMap((r) => r.instances);
  /** What the reusing parse passes: where each object sat in the previous document. */
  const reusedFrom = (before: JsonObject, after: JsonObject): Int32Array => {
    const previous = objectsOf(before);
    return Int32Array.from(objectsOf(after), (o) => previous.indexOf(o));
  };
  const outcome = (run: () => unknown) => {
    try {
      return { ok: run() };
    } catch (e) {
      if (!(e instanceof DomainError)) throw e;
      return { error: e.message };
    }
  };

  const a = [instance(0, 'a0'), instance(1, 'a1'), instance(2, 'a2')];
  const b = [instance(0, 'b0')];
  const first = doc([
    { name: 'a', instances: a },
    { name: 'b', instances: b },
  ]);

  /** Validates `first`, then `next` with first's book. */
  function second(next: JsonObject) {
    const { book } = validateReusingDocument(first, {
      from: new Int32Array(objectsOf(first).length).fill(-1),
      book: null,
    });
    const reused: ReusedInstances = { from: reusedFrom(first, next), book };
    const result = outcome(() => validateReusingDocument(next, reused));
    // The full check decides the same: a refusal worded alike, or acceptance.
    const full = outcome(() => validateStateDocument(next));
    if ('error' in full) expect(result).toEqual(full);
    else expect(result).toMatchObject({ ok: { document: next } });
    return { book, result };
  }

  it('accepts a change that keeps the other objects, and hands its book on', () => {
    const { book, result } = second(
      doc([
        { name: 'a', instances: [a[0], instance(1, 'a1 changed'), a[2], instance(3, 'a3')] },
        { name: 'b', instances: b },
      ]),
    );
    expect(book.taken).toBe(true);
    const next = (result as { ok: ReturnType<typeof validateReusingDocument> }).ok.book;
    expect(next.slots.map((s) => s.address)).toEqual([
      'terraform_data.a[0]',
      'terraform_data.a[1]',
      'terraform_data.a[2]',
      'terraform_data.a[3]',
      'terraform_data.b[0]',
    ]);
    expect(next.slots.map((s) => s.index)).toEqual([0, 1, 2, 3, 4]);
    expect([...next.byAddress.keys()].sort()).toEqual(next.slots.map((s) => s.address).sort());
  });

  it('refuses a new object that repeats the address of a kept one, as the full check words it', () => {
    const { result } = second(
      doc([
        { name: 'a', instances: [a[0], a[1], a[2], instance(1, 'a second [1]')] },
        { name: 'b', instances: b },
      ]),
    );
    expect(result).toEqual({
      error: 'resources[0].instances[3] repeats the address terraform_data.a[1]',
    });
  });

  it('refuses a kept object moved under a resource where its address repeats another', () => {
    // b's object, unchanged, now sits in a second resource named "a": its
    // address is terraform_data.a[0], which a[0] already has.
    const { result } = second(
      doc([
        { name: 'a', instances: a },
        { name: 'a', instances: b },
      ]),
    );
    expect(result).toEqual({
      error: 'resources[1].instances[0] repeats the address terraform_data.a[0]',
    });
  });

  it('refuses two new objects with one address, and an address grown too long', () => {
    expect(
      second(
        doc([
          { name: 'a', instances: [...a, instance(7, 'x'), instance(7, 'y')] },
          { name: 'b', instances: b },
        ]),
      ).result,
    ).toEqual({ error: 'resources[0].instances[4] repeats the address terraform_data.a[7]' });
    const long = { ...instance(0, 'x'), index_key: 'k'.repeat(900) };
    expect(
      second(
        doc([
          { name: 'a', instances: a },
          { name: 'b', instances: [long] },
        ]),
      ).result,
    ).toMatchObject({
      error: expect.stringMatching(
        /^resources\[1\].instances\[0\] has an address longer than 800 bytes/,
      ),
    });
  });

  it('checks in full, and still refuses, with a book another document took over', () => {
    const { book } = validateReusingDocument(first, {
      from: new Int32Array(4).fill(-1),
      book: null,
    });
    const keep = doc([
      { name: 'a', instances: a },
      { name: 'b', instances: b },
    ]);
    validateReusingDocument(keep, { from: reusedFrom(first, keep), book });
    expect(book.taken).toBe(true);
    const repeated = doc([
      { name: 'a', instances: [...a, instance(0, 'again')] },
      { name: 'b', instances: b },
    ]);
    expect(
      outcome(() => validateReusingDocument(repeated, { from: reusedFrom(first, repeated), book })),
    ).toEqual({ error: 'resources[0].instances[3] repeats the address terraform_data.a[0]' });
  });
});
