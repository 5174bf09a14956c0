import { isUtf8 } from 'node:buffer';
import { DomainError } from '../shared/domain-error';
import {
  InstanceBytes,
  instanceBytesOf,
  instanceSpans,
  parseStateBodyReusing,
} from './instance-spans';
import { parseStateDocument } from './parse-state-document';
import { InstanceObjectV4, StateDocumentV4 } from './state-document';
import { instanceObjectText, stateDocumentText } from './state-document-text';
import { flattenInstances } from './state-instances';
import { fuzzSeeds, random, seedRange, withSeed } from '../../../test/support/seeded-random';

type Rand = () => number;
const pick = <T>(r: Rand, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];

// Strings that make a scanner's life hard: quotes, backslashes before quotes, brackets, escapes.
const AWKWARD = ['plain', 'q"uote', 'back\\', '\\"', '{[}]', 'é ü 漢', '\n\t', '', ',:'];
// Numbers as text: beyond double precision, exponents, negative zero.
const NUMBERS = [
  '0',
  '-0',
  '1.5',
  '12345678901234567890123',
  '1e300',
  '-2.5E-7',
  '9007199254740993',
];

function attribute(r: Rand, depth: number): string {
  const kind = Math.floor(r() * (depth > 2 ? 3 : 5));
  if (kind === 0) return JSON.stringify(pick(r, AWKWARD) + Math.floor(r() * 5));
  if (kind === 1) return pick(r, NUMBERS);
  if (kind === 2) return pick(r, ['true', 'false', 'null']);
  if (kind === 3)
    return `[${Array.from({ length: Math.floor(r() * 3) }, () => attribute(r, depth + 1)).join(',')}]`;
  return object(r, depth + 1);
}

function object(r: Rand, depth: number): string {
  const n = Math.floor(r() * 4);
  const members = Array.from(
    { length: n },
    (_, i) => `${JSON.stringify(`${pick(r, AWKWARD)}${i}`)}:${attribute(r, depth)}`,
  );
  return `{${members.join(',')}}`;
}

interface Inst {
  key: number;
  text: string;
}

interface Res {
  name: string;
  provider: string;
  instances: Inst[];
}

function instanceText(r: Rand, key: number, withKey: boolean): string {
  const space = pick(r, ['', ' ', '\n      ']);
  const members = [
    ...(withKey ? [`"index_key":${key}`] : []),
    `"schema_version":${Math.floor(r() * 3)}`,
    `"attributes":${object(r, 1)}`,
    `"sensitive_attributes":[]`,
  ];
  if (r() < 0.3) members.reverse();
  return `{${space}${members.join(`,${space}`)}${space}}`;
}

function newState(r: Rand): Res[] {
  return Array.from({ length: 1 + Math.floor(r() * 4) }, (_, i) => ({
    name: `r${i}`,
    provider: 'provider["registry.terraform.io/hashicorp/null"]',
    instances: Array.from({ length: 1 + Math.floor(r() * 4) }, (_, k) => ({
      key: k,
      text: instanceText(r, k, true),
    })),
  }));
}

function text(resources: Res[], serial: number, space: string): string {
  const rs = resources.map(
    (res) =>
      `{"mode":"managed","type":"null_resource","name":${JSON.stringify(res.name)},` +
      `"provider":${JSON.stringify(res.provider)},"each":"list",` +
      `"instances":[${space}${res.instances.map((i) => i.text).join(`,${space}`)}${space}]}`,
  );
  return (
    `{${space}"version":4,"terraform_version":"1.11.4","serial":${serial},` +
    `"lineage":"l-1","outputs":{"o":{"value":${pick(random(serial), NUMBERS)}}},` +
    `"resources":[${space}${rs.join(`,${space}`)}${space}],"check_results":null}\n`
  );
}

/** One random edit, as an apply (or a hostile client) would make it. */
function edit(r: Rand, resources: Res[]): Res[] {
  const next = resources.map((res) => ({ ...res, instances: [...res.instances] }));
  const res = pick(r, next);
  const at = Math.floor(r() * res.instances.length);
  switch (Math.floor(r() * 10)) {
    case 0: // new attributes
      res.instances[at] = {
        key: res.instances[at].key,
        text: instanceText(r, res.instances[at].key, true),
      };
      break;
    case 1: // same value, other whitespace
      res.instances[at] = {
        key: res.instances[at].key,
        text: res.instances[at].text.replace(/,/g, ', ').replace(/^\{/, '{ '),
      };
      break;
    case 2: // an instance added
      res.instances.push({
        key: res.instances.length,
        text: instanceText(r, res.instances.length, true),
      });
      break;
    case 3: // an instance removed
      if (res.instances.length > 1) res.instances.splice(at, 1);
      break;
    case 4: // the resource moves to another provider: every instance hashes anew
      res.provider = 'provider["registry.terraform.io/hashicorp/other"]';
      break;
    case 5: // a duplicate address: refused
      res.instances.push({ ...res.instances[at] });
      break;
    case 6: // not JSON inside an instance: refused
      res.instances[at] = {
        key: res.instances[at].key,
        text: res.instances[at].text.replace('{', '{,'),
      };
      break;
    case 7: // an instance without attributes: refused
      res.instances[at] = {
        key: res.instances[at].key,
        text: `{"index_key":${res.instances[at].key},"schema_version":0}`,
      };
      break;
    case 8: // one letter changed: the same length, another value
      res.instances[at] = {
        key: res.instances[at].key,
        text: res.instances[at].text.replace(
          /([a-z])([^a-z]*)$/,
          (_, c: string, rest: string) => `${c === 'x' ? 'y' : 'x'}${rest}`,
        ),
      };
      break;
    default: // the resource renamed: every address is new
      res.name = `${res.name}x`;
      break;
  }
  return next;
}

/** What kld's receiving route decodes with: empty and non-UTF-8 bodies refused, worded. */
function decode(body: Buffer): string {
  if (body.length === 0) throw new DomainError('STATE.INVALID', 'state is empty');
  if (!isUtf8(body)) throw new DomainError('STATE.INVALID', 'state is not valid UTF-8');
  return body.toString('utf8');
}

/** Byte-level damage text edits cannot make: bad UTF-8, a cut body, a byte flipped. */
function damage(r: Rand, body: Buffer): Buffer {
  const at = Math.floor(r() * body.length);
  switch (Math.floor(r() * 4)) {
    case 0: // a lone continuation byte
      return Buffer.concat([body.subarray(0, at), Buffer.from([0x80]), body.subarray(at)]);
    case 1: // a multi-byte sequence cut short
      return Buffer.concat([body.subarray(0, at), Buffer.from([0xe6, 0xbc]), body.subarray(at)]);
    case 2: // truncated
      return body.subarray(0, at);
    default: {
      // one byte changed
      const copy = Buffer.from(body);
      copy[at] = copy[at] === 0x7d ? 0x5d : 0x7d;
      return copy;
    }
  }
}

function outcome(parse: () => unknown): { ok: unknown } | { error: string } {
  try {
    return { ok: parse() };
  } catch (e) {
    if (!(e instanceof DomainError)) throw e;
    return { error: `${e.code} ${e.message}` };
  }
}

describe('parseStateBodyReusing', () => {
  it('parses every randomly edited document exactly as parseStateDocument does, and hashes the same changed set', () => {
    let reusedSomething = false;
    let checkedByBook = 0;
    const seeds = fuzzSeeds(seedRange(1, 150));
    for (const seed of seeds) {
      withSeed(seed, () => {
        const r = random(seed);
        let resources = newState(r);
        let memo: InstanceBytes | undefined;
        let serial = 1;
        for (let step = 0; step < 8; step++) {
          const space = pick(r, ['', '\n', '\n  ']);
          let body = text(resources, serial, space);
          if (r() < 0.1) body = body.replace('"instances"', '"inst\\u0061nces"');
          if (r() < 0.05) body = body.replace('"resources":[', '"resources":[],"resources":[');
          if (r() < 0.1) {
            // A decoy only the scan sees: JSON.parse keeps the last of two equal names.
            const decoy = '{"index_key":0,"schema_version":0,"attributes":{"decoy":1}}';
            body = body.replace('"instances":[', `"instances":[${decoy}],"inst\\u0061nces":[`);
          }
          let bytes: Buffer = Buffer.from(body);
          if (r() < 0.08) bytes = damage(r, bytes);
          const full = outcome(() => parseStateDocument(decode(bytes)));
          const reusing = outcome(() => parseStateBodyReusing(bytes, memo, decode));
          if ('error' in full) {
            expect(reusing).toEqual(full);
          } else {
            expect('ok' in reusing).toBe(true);
            const { document, instances } = (
              reusing as { ok: ReturnType<typeof parseStateBodyReusing> }
            ).ok;
            expect(document).toEqual(full.ok);
            const hashes = (d: Parameters<typeof flattenInstances>[0]) =>
              flattenInstances(d).map((i) => [i.address, i.hash]);
            expect(hashes(document)).toEqual(
              hashes(full.ok as Parameters<typeof flattenInstances>[0]),
            );
            for (const res of document.resources) {
              for (const instance of res.instances) {
                if (memo?.objects.includes(instance)) reusedSomething = true;
              }
            }
            if (instances.addresses !== null) {
              // The book handed to the next parse holds exactly this document's addresses.
              const addresses = flattenInstances(document).map((i) => i.address);
              expect(instances.addresses.slots.map((s) => s.address)).toEqual(addresses);
              expect(instances.addresses.slots.map((s) => s.index)).toEqual(
                addresses.map((_, k) => k),
              );
              expect([...instances.addresses.byAddress.keys()].sort()).toEqual(
                [...addresses].sort(),
              );
            }
            // The previous document's book was taken over: its addresses were not formatted again.
            if (memo?.addresses?.taken === true) checkedByBook++;
            if (instances.spans.length > 0) memo = instances;
          }
          resources = edit(r, resources);
          serial++;
        }
      });
    }
    expect(reusedSomething).toBe(true);
    expect(checkedByBook).toBeGreaterThan((seeds.length * 2) / 3);
  });

  it('compares long runs of unchanged instances at once and still finds exactly what changed', () => {
    // Arrays of hundreds of instances: the scan compares runs of them with one
    // memcmp; edits anywhere in a run (and at its ends) must still be found.
    for (const seed of fuzzSeeds(seedRange(1, 5))) {
      withSeed(seed, () => {
        const r = random(seed);
        let resources: Res[] = [0, 1].map((i) => ({
          name: `big${i}`,
          provider: 'provider["registry.terraform.io/hashicorp/null"]',
          instances: Array.from({ length: 300 }, (_, k) => ({
            key: k,
            text: instanceText(r, k, true),
          })),
        }));
        let memo: InstanceBytes | undefined;
        for (let serial = 1; serial <= 10; serial++) {
          const bytes = Buffer.from(text(resources, serial, '\n  '));
          const full = outcome(() => parseStateDocument(decode(bytes)));
          const reusing = outcome(() => parseStateBodyReusing(bytes, memo, decode));
          if ('error' in full) {
            expect(reusing).toEqual(full);
          } else {
            const { document, instances } = (
              reusing as { ok: ReturnType<typeof parseStateBodyReusing> }
            ).ok;
            expect(document).toEqual(full.ok);
            const texts = resources.flatMap((res) => res.instances.map((i) => i.text));
            expect(instances.spans.map((sp) => bytes.toString('utf8', sp.start, sp.end))).toEqual(
              texts,
            );
            if (memo !== undefined) {
              // An instance is shared exactly when the previous document had its text next.
              const shared = instances.spans.filter((sp) => sp.reuse !== undefined).length;
              expect(shared).toBeGreaterThan(texts.length - 30);
              for (const sp of instances.spans) {
                if (sp.reuse === undefined) continue;
                const before = memo.spans[sp.from!];
                expect(memo.body.subarray(before.start, before.end)).toEqual(
                  bytes.subarray(sp.start, sp.end),
                );
              }
            }
            memo = instances;
          }
          for (let e = 0; e < 1 + Math.floor(r() * 6); e++) resources = edit(r, resources);
        }
      });
    }
  });

  it('parses only the instances whose text changed, and shares the others with the previous document', () => {
    for (const seed of fuzzSeeds([7])) {
      withSeed(seed, () => {
        const r = random(seed);
        const resources = newState(r);
        const first = parseStateBodyReusing(Buffer.from(text(resources, 1, '\n')));
        expect(first.instances.spans.length).toBe(
          resources.reduce((n, res) => n + res.instances.length, 0),
        );
        // One instance, anywhere, gets another text; every other is as it was.
        const changed = resources.map((res) => ({ ...res, instances: [...res.instances] }));
        const res = Math.floor(r() * changed.length);
        const at = Math.floor(r() * changed[res].instances.length);
        const key = changed[res].instances[at].key;
        changed[res].instances[at] = {
          key,
          text: `{"index_key":${key},"schema_version":1,"attributes":{"v":2}}`,
        };
        const second = parseStateBodyReusing(Buffer.from(text(changed, 2, '\n')), first.instances);
        const before = new Set(first.document.resources.flatMap((x) => x.instances));
        const shared = second.document.resources.map((x) =>
          x.instances.map((instance) => before.has(instance)),
        );
        expect(shared).toEqual(
          changed.map((x, i) => x.instances.map((_, k) => !(i === res && k === at))),
        );
      });
    }
  });

  it('finds the text of each instance, whatever its strings hold', () => {
    const body = Buffer.from(
      `{"resources":[{"instances":[{"a":"\\\\"},{"b":"]}\\""}, 12]},{"x":[1,{"instances":[9]}],"instances":[]}]}`,
    );
    expect(instanceSpans(body)?.map((s) => body.toString('utf8', s.start, s.end))).toEqual([
      '{"a":"\\\\"}',
      '{"b":"]}\\""}',
      '12',
    ]);
    expect(instanceSpans(Buffer.from('[1]'))).toBeNull();
    expect(instanceSpans(Buffer.from('{"resources":[{"instances":[{"a":1}]}]'))).toBeNull();
  });
});

describe('instanceBytesOf', () => {
  /** Served bytes as the raw-state projector makes them, counting what it was asked. */
  function servedBytes() {
    const asked: InstanceObjectV4[] = [];
    return {
      asked,
      bytes: (o: InstanceObjectV4) => {
        asked.push(o);
        return Buffer.from(instanceObjectText(o));
      },
    };
  }
  const instancesOf = (doc: StateDocumentV4) => doc.resources.flatMap((res) => res.instances);
  const plain = (spans: readonly object[]) => spans.map((span) => ({ ...span }));

  it('places the instances of a body written as kld serves it where the scan finds them', () => {
    for (const seed of fuzzSeeds(seedRange(1, 40))) {
      withSeed(seed, () => {
        // two-space indentation, as terraform writes
        const body = Buffer.from(
          stateDocumentText(parseStateDocument(text(newState(random(seed)), seed, ''))),
        );
        const doc = parseStateDocument(decode(body));
        const served = servedBytes();
        const laidOut = instanceBytesOf(body, doc, served.bytes);
        expect(served.asked).toEqual(instancesOf(doc)); // compared, not scanned
        expect(plain(laidOut.spans)).toEqual(plain(instanceSpans(body)!));
        expect(laidOut.objects).toEqual(instancesOf(doc));
        laidOut.objects.forEach((o, k) => expect(laidOut.objects[k]).toBe(instancesOf(doc)[k]));
      });
    }
  });

  it('scans a body spelled otherwise: compact, other escapes, another indentation', () => {
    for (const seed of fuzzSeeds([5])) {
      withSeed(seed, () => {
        const doc = parseStateDocument(text(newState(random(seed)), 1, ''));
        const served = stateDocumentText(doc);
        const bodies = [
          text(newState(random(seed)), 1, ''), // compact
          served.replace('"version"', '"\\u0076ersion"'), // an escape terraform's encoder may write
          served.replace(/\n {2}/g, '\n\t'), // tabs
          served.slice(0, -1), // no final newline
        ];
        for (const t of bodies) {
          const body = Buffer.from(t);
          const found = instanceBytesOf(body, parseStateDocument(t), servedBytes().bytes);
          expect(plain(found.spans)).toEqual(plain(instanceSpans(body)!));
        }
      });
    }
  });

  it('lets the next body reuse what it places, parsing every edit exactly as parseStateDocument', () => {
    for (const seed of fuzzSeeds(seedRange(1, 60))) {
      withSeed(seed, () => {
        const r = random(seed);
        const resources = newState(r);
        // as kld holds it: the document parsed from the very body (written as served)
        const first = Buffer.from(stateDocumentText(parseStateDocument(text(resources, 1, ''))));
        const doc = parseStateDocument(decode(first));
        const previous = instanceBytesOf(first, doc, servedBytes().bytes);
        expect(previous.spans).toHaveLength(instancesOf(doc).length);
        const edited = parseStateDocument(text(resources, 2, ''));
        // the same document, an instance spelled anew (other whitespace): parsed, not reused
        const next = Buffer.from(
          stateDocumentText(edited).replace('"schema_version":', '"schema_version" :'),
        );
        const reusing = outcome(() => parseStateBodyReusing(next, previous, decode));
        const whole = outcome(() => parseStateDocument(decode(next)));
        expect(reusing).toEqual(
          'ok' in whole ? { ok: { document: whole.ok, instances: expect.anything() } } : whole,
        );
        if (!('ok' in reusing)) return;
        const after = instancesOf((reusing.ok as { document: StateDocumentV4 }).document);
        const before = new Set(instancesOf(doc));
        // every instance but the first (which the edit respelled) is the object parsed before
        expect(after.filter((o) => before.has(o))).toHaveLength(after.length - 1);
      });
    }
  });
});
