import { createHash } from 'node:crypto';
import { ChunkNames, documentChunks, instanceDigest, InstanceEncoding } from './document-chunks';
import { InstanceObjectV4, StateDocumentV4 } from './state-document';
import { instanceObjectText, stateDocumentBytes } from './state-document-text';
import { fuzzSeeds, random, seedRange, withSeed } from '../../../test/support/seeded-random';

const encoding: InstanceEncoding = {
  bytes: (o: InstanceObjectV4) => Buffer.from(instanceObjectText(o), 'utf8'),
  digest: (o: InstanceObjectV4) => instanceDigest(Buffer.from(instanceObjectText(o), 'utf8')),
};

function instance(key: number, value: string): InstanceObjectV4 {
  return {
    index_key: key,
    schema_version: 0,
    attributes: { id: `i-${key}`, value, note: 'é "q" \\ 漢' },
    sensitive_attributes: [],
  };
}

/** `resources` resources of `perResource` instances each, values drawn from `r`. */
function document(r: () => number, resources: number, perResource: number): StateDocumentV4 {
  return {
    version: 4,
    terraform_version: '1.11.4',
    serial: 1,
    lineage: 'l',
    outputs: { o: { value: 1, type: 'number' } },
    resources: Array.from({ length: resources }, (_, i) => ({
      mode: 'managed' as const,
      type: 'terraform_data',
      name: `r${i}`,
      provider: 'provider["terraform.io/builtin/terraform"]',
      instances: Array.from({ length: perResource }, (_, k) =>
        instance(
          k,
          r()
            .toString(36)
            .repeat(1 + Math.floor(r() * 20)),
        ),
      ),
    })),
    check_results: null,
  };
}

const joined = (doc: StateDocumentV4) =>
  Buffer.concat(documentChunks(doc, encoding).flatMap((c) => c.parts));
const ids = (doc: StateDocumentV4) => documentChunks(doc, encoding).map((c) => c.id);
const newIds = (before: string[], after: string[]) => after.filter((id) => !before.includes(id));

describe('document chunks', () => {
  it('are, concatenated in order, exactly the served bytes of the document', () => {
    for (const seed of fuzzSeeds(seedRange(1, 40))) {
      withSeed(seed, () => {
        const r = random(seed);
        const doc = document(r, Math.floor(r() * 30), Math.floor(r() * 40));
        expect(joined(doc).equals(stateDocumentBytes(doc))).toBe(true);
        for (const c of documentChunks(doc, encoding)) {
          expect(c.size).toBe(c.parts.reduce((n, p) => n + p.length, 0));
        }
      });
    }
  });

  it('are cut at content, so the same document always gives the same ids', () => {
    for (const seed of fuzzSeeds([7])) {
      withSeed(seed, () => {
        const a = document(random(seed), 20, 100);
        const b = structuredClone(a);
        expect(ids(b)).toEqual(ids(a));
        expect(ids(a).length).toBeGreaterThan(10);
        expect(new Set(ids(a)).size).toBe(ids(a).length);
      });
    }
  });

  it('change in at most two places when one instance changes, is added or is removed', () => {
    for (const seed of fuzzSeeds(seedRange(1, 8))) {
      withSeed(seed, () => {
        const r = random(seed);
        const before = document(r, 20, 100);
        const was = ids(before);
        const resource = Math.floor(r() * 20);
        const at = Math.floor(r() * 100);

        const changed = structuredClone(before);
        changed.resources[resource].instances[at].attributes = { id: 'changed' };
        expect(newIds(was, ids(changed)).length).toBeLessThanOrEqual(2);

        const added = structuredClone(before);
        added.resources[resource].instances.splice(at, 0, instance(1000 + at, 'new'));
        expect(newIds(was, ids(added)).length).toBeLessThanOrEqual(2);

        const removed = structuredClone(before);
        removed.resources[resource].instances.splice(at, 1);
        expect(newIds(was, ids(removed)).length).toBeLessThanOrEqual(2);
        expect(joined(removed).equals(stateDocumentBytes(removed))).toBe(true);
      });
    }
  });

  it('never holds more than about a MiB, however the boundaries fall', () => {
    for (const seed of fuzzSeeds([3])) {
      withSeed(seed, () => {
        const big = document(random(seed), 1, 3000);
        for (const inst of big.resources[0].instances)
          inst.attributes = { value: 'x'.repeat(2000) };
        for (const c of documentChunks(big, encoding)) {
          expect(c.size).toBeLessThan((1 << 20) + 4096);
        }
        expect(joined(big).equals(stateDocumentBytes(big))).toBe(true);
      });
    }
  });

  it('names each chunk by the SHA-256 of its framed separators and instance digests, as stored ids always were', () => {
    // Chunk ids are stored: the same document must keep getting the same ids.
    const frame = (kind: number, length: number) => {
      const b = Buffer.alloc(5);
      b.writeUInt8(kind, 0);
      b.writeUInt32BE(length, 1);
      return b;
    };
    for (const seed of fuzzSeeds([7])) {
      withSeed(seed, () => {
        const doc = document(random(seed), 3, 150);
        for (const chunk of documentChunks(doc, encoding)) {
          const hash = createHash('sha256');
          let at = 0;
          const bytes = Buffer.concat(chunk.parts);
          for (const part of chunk.parts) {
            const instance = instanceAt(doc, part);
            if (instance === undefined) hash.update(frame(0, part.length)).update(part);
            else hash.update(frame(1, 32)).update(encoding.digest(instance));
            at += part.length;
          }
          expect(at).toBe(bytes.length);
          expect(chunk.id).toBe(hash.digest('hex'));
        }
      });
    }
  });

  it('keep the ids a full hashing gives when unchanged chunks are named from the last version', () => {
    // Each version shares the previous one's unchanged objects (as the reusing
    // parse and the projector's cache do); edits include what a stale name
    // would get wrong: a new separator before the same instances (a renamed
    // resource, a changed provider), an instance moved to another resource,
    // one removed from the middle of a chunk, the same object twice.
    const cache = new WeakMap<InstanceObjectV4, { bytes: Buffer; digest: Buffer }>();
    const cached = (o: InstanceObjectV4) => {
      let e = cache.get(o);
      if (e === undefined)
        cache.set(o, (e = { bytes: encoding.bytes(o), digest: encoding.digest(o) }));
      return e;
    };
    let hashed = 0;
    const counting: InstanceEncoding = {
      bytes: (o) => cached(o).bytes,
      digest: (o) => {
        hashed++;
        return cached(o).digest;
      },
    };
    for (const seed of fuzzSeeds(seedRange(1, 8))) {
      withSeed(seed, () => {
        const r = random(seed);
        const names = new ChunkNames();
        let doc = document(r, 10, 100);
        let reused = 0;
        for (let v = 0; v < 10; v++) {
          if (v > 0) doc = edit(r, doc);
          hashed = 0;
          const named = documentChunks(doc, counting, names);
          const digestsNamed = hashed;
          const full = documentChunks(doc, {
            bytes: encoding.bytes,
            digest: (o) => cached(o).digest,
          });
          expect(named.map((c) => [c.id, c.size])).toEqual(full.map((c) => [c.id, c.size]));
          const served = stateDocumentBytes(doc, (o) => cached(o).bytes);
          expect(Buffer.concat(named.flatMap((c) => c.parts)).equals(served)).toBe(true);
          // One digest per instance for the cuts, plus those of the chunks hashed again.
          const instances = doc.resources.reduce((n, x) => n + x.instances.length, 0);
          if (v > 0) reused += instances * 2 - digestsNamed;
        }
        // Names were really reused: most instances were not hashed again.
        expect(reused).toBeGreaterThan(9 * 1000 * 0.5);
      });
    }
  });
});

/** A next version sharing `doc`'s unchanged objects, with 1–3 random edits. */
function edit(r: () => number, doc: StateDocumentV4): StateDocumentV4 {
  const next: StateDocumentV4 = {
    ...doc,
    resources: doc.resources.map((x) => ({ ...x, instances: [...x.instances] })),
  };
  const pick = () => next.resources[Math.floor(r() * next.resources.length)];
  for (let e = 1 + Math.floor(r() * 3); e > 0; e--) {
    const res = pick();
    const at = Math.floor(r() * res.instances.length);
    switch (Math.floor(r() * 7)) {
      case 0:
        if (res.instances.length > 0) res.instances[at] = instance(at, `c${r()}`);
        break;
      case 1:
        res.instances.splice(at, 0, instance(5000 + at, `a${r()}`));
        break;
      case 2:
        res.instances.splice(at, 1);
        break;
      case 3:
        res.name = `${res.name}x`;
        break;
      case 4:
        res.provider = `${res.provider}x`;
        break;
      case 5: {
        const moved = res.instances.splice(at, 1);
        pick().instances.push(...moved);
        break;
      }
      default:
        if (res.instances.length > 0) res.instances.push(res.instances[at]);
    }
  }
  return next;
}

/** The instance of `doc` whose served bytes are `part`, if any. */
function instanceAt(doc: StateDocumentV4, part: Buffer): InstanceObjectV4 | undefined {
  return doc.resources.flatMap((r) => r.instances).find((o) => encoding.bytes(o).equals(part));
}
