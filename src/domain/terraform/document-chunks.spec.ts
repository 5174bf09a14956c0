import { createHash } from 'node:crypto';
import { documentChunks, instanceDigest, InstanceEncoding } from './document-chunks';
import { InstanceObjectV4, StateDocumentV4 } from './state-document';
import { instanceObjectText, stateDocumentBytes } from './state-document-text';
import { random } from '../../../test/support/seeded-random';

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
    for (let seed = 1; seed <= 40; seed++) {
      const r = random(seed);
      const doc = document(r, Math.floor(r() * 30), Math.floor(r() * 40));
      expect(joined(doc).equals(stateDocumentBytes(doc))).toBe(true);
      for (const c of documentChunks(doc, encoding)) {
        expect(c.size).toBe(c.parts.reduce((n, p) => n + p.length, 0));
      }
    }
  });

  it('are cut at content, so the same document always gives the same ids', () => {
    const a = document(random(7), 20, 100);
    const b = structuredClone(a);
    expect(ids(b)).toEqual(ids(a));
    expect(ids(a).length).toBeGreaterThan(10);
    expect(new Set(ids(a)).size).toBe(ids(a).length);
  });

  it('change in at most two places when one instance changes, is added or is removed', () => {
    for (let seed = 1; seed <= 8; seed++) {
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
    }
  });

  it('never holds more than about a MiB, however the boundaries fall', () => {
    const big = document(random(3), 1, 3000);
    for (const inst of big.resources[0].instances) inst.attributes = { value: 'x'.repeat(2000) };
    for (const c of documentChunks(big, encoding)) {
      expect(c.size).toBeLessThan((1 << 20) + 4096);
    }
    expect(joined(big).equals(stateDocumentBytes(big))).toBe(true);
  });

  it('names each chunk by the SHA-256 of its framed separators and instance digests, as stored ids always were', () => {
    // Chunk ids are stored: the same document must keep getting the same ids.
    const frame = (kind: number, length: number) => {
      const b = Buffer.alloc(5);
      b.writeUInt8(kind, 0);
      b.writeUInt32BE(length, 1);
      return b;
    };
    const doc = document(random(7), 3, 150);
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
});

/** The instance of `doc` whose served bytes are `part`, if any. */
function instanceAt(doc: StateDocumentV4, part: Buffer): InstanceObjectV4 | undefined {
  return doc.resources.flatMap((r) => r.instances).find((o) => encoding.bytes(o).equals(part));
}
