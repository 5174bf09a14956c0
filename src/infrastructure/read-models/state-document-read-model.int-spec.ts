import { StateHarness } from '../../../test/support/state-harness';
import { DEFAULT_CACHE_BUDGETS } from '../../application/bounded-cache';
import { WrittenChunks } from '../../application/state/written-chunks';
import { fuzzSeeds, random, withSeed } from '../../../test/support/seeded-random';
import { contentMd5, parseStateDocument } from '../../domain/terraform';
import type { Database } from '../postgres/database';
import { StateDocumentReadModel } from './state-document-read-model';

/**
 * The current document served right after each commit is exactly the bytes
 * committed, on the process that serves every version (it keeps the chunks
 * of the last one and reads only new ones), on a replica that serves now
 * and then (it skips versions), and on one with nothing cached.
 */

const VALUES = [
  'nul \u0000 inside',
  'tab\tand\r\nCRLF',
  'no-break\u00a0space and line\u2028separator',
  'é 漢 🙂',
  '  leading and trailing  ',
];
const BIG = [
  '12345678901234567890123',
  '-9007199254740993.5',
  '1e-400',
  '0.1000000000000000055511151231257827',
];

/** A state as terraform writes it: two-space JSON and a newline; big numbers as written. */
function body(serial: number, values: Map<number, string>, bigs: Map<number, string>): string {
  const resources = new Map<string, { name: string; instances: unknown[] }>();
  for (const key of [...values.keys()].sort((a, b) => a - b)) {
    const name = `r${key % 7}`;
    const r = resources.get(name) ?? { name, instances: [] };
    resources.set(name, r);
    r.instances.push({
      index_key: key,
      schema_version: 0,
      attributes: { id: `i${key}`, input: values.get(key), big: `@big${key}@` },
      sensitive_attributes: [],
    });
  }
  const doc = {
    version: 4,
    terraform_version: '1.11.4',
    serial,
    lineage: 'lineage-get',
    outputs: {},
    // Terraform's order: by module, mode, type, name (here only names differ).
    resources: [...resources.values()]
      .sort((a, b) => a.name.localeCompare(b.name))
      .map((r) => ({
        mode: 'managed',
        type: 'terraform_data',
        name: r.name,
        provider: 'provider["terraform.io/builtin/terraform"]',
        instances: r.instances,
      })),
    check_results: null,
  };
  return `${JSON.stringify(doc, null, 2)}\n`.replace(
    /"@big(\d+)@"/g,
    (_, key: string) => bigs.get(Number(key)) ?? '0',
  );
}

/**
 * The harness's database with its chunk reads counted in `reads.chunks`:
 * the chunks are read through `pool`, the manifest through `prepared`.
 */
function countingChunkReads(h: StateHarness, reads: { chunks: number }): Database {
  const pool = new Proxy(h.db.pool, {
    get(target, prop, receiver) {
      if (prop === 'query') {
        return (...args: unknown[]) => {
          reads.chunks += 1;
          return (target.query as (...a: unknown[]) => unknown).apply(target, args);
        };
      }
      return Reflect.get(target, prop, receiver) as unknown;
    },
  });
  return { pool, prepared: h.db.prepared.bind(h.db) } as unknown as Database;
}

describe('StateDocumentReadModel: the GET right after a commit', () => {
  let h: StateHarness;

  beforeAll(async () => {
    h = await StateHarness.create();
  });
  afterAll(async () => {
    await h.close();
  });

  it.each(fuzzSeeds([9]))(
    'serves exactly the committed bytes after each of 40 commits, on every replica, and history unchanged (seed %i)',
    (seed) =>
      withSeed(seed, async () => {
        const r = random(seed);
        const name = `get-${seed}`;
        const values = new Map<number, string>();
        const bigs = new Map<number, string>();
        for (let k = 0; k < 500; k++) {
          values.set(k, `${VALUES[k % VALUES.length]} ${k}`);
          bigs.set(k, BIG[k % BIG.length]);
        }
        const replica = new StateDocumentReadModel(h.db);
        const committed: string[] = [];
        for (let serial = 1; serial <= 40; serial++) {
          // A few instances changed, added or removed, now and then many; sometimes the first.
          const edits = r() < 0.1 ? 120 : 1 + Math.floor(r() * 5);
          for (let e = 0; e < edits; e++) {
            const key = serial % 4 === 0 && e === 0 ? 0 : Math.floor(r() * 650);
            if (r() < 0.2) values.delete(key);
            else {
              values.set(key, `${VALUES[Math.floor(r() * VALUES.length)]} v${serial}`);
              bigs.set(key, BIG[Math.floor(r() * BIG.length)]);
            }
          }
          const text = body(serial, values, bigs);
          committed.push(text);
          await h.commit(name, parseStateDocument(text));

          const readers = [h.documents, new StateDocumentReadModel(h.db)];
          if (serial % 3 === 0) readers.push(replica);
          for (const reader of readers) {
            const served = (await reader.currentBody(name))!;
            const bytes = Buffer.concat(served.parts);
            expect(bytes.toString('utf8')).toBe(text);
            expect(served.size).toBe(bytes.length);
            expect(served.md5).toBe(contentMd5(bytes));
            expect(served.version).toBe(serial);
          }
        }
        expect(committed.join('')).toContain('\\u0000');
        // History: every version by serial, byte for byte as committed.
        for (const [i, text] of committed.entries()) {
          expect(await h.documents.atSerial(name, i + 1)).toBe(text);
        }
      }),
  );

  it('serves a whole later version when a commit removes a chunk between reading the manifest and its chunks', async () => {
    const values = new Map<number, string>();
    const bigs = new Map<number, string>();
    for (let k = 0; k < 500; k++) values.set(k, `value ${k}`);
    await h.commit('race', parseStateDocument(body(1, values, bigs)));
    let interleave: (() => Promise<void>) | null = null;
    // The manifest is read with db.prepared, the chunks with db.pool: commit in between.
    const racing = {
      pool: h.db.pool,
      prepared: async (...args: Parameters<Database['prepared']>) => {
        const rows = await h.db.prepared(...args);
        const run = interleave;
        interleave = null;
        if (run) await run();
        return rows;
      },
    } as unknown as Database;
    const reader = new StateDocumentReadModel(racing);
    expect((await reader.current('race'))!.document).toBe(body(1, values, bigs));

    values.set(250, 'changed in version 2');
    await h.commit('race', parseStateDocument(body(2, values, bigs)));
    // Version 3 changes the same instance again: version 2's new chunk is deleted.
    values.set(250, 'changed in version 3');
    const third = body(3, values, bigs);
    interleave = () => h.commit('race', parseStateDocument(third));
    const served = (await reader.currentBody('race'))!;
    expect(interleave).toBeNull();
    expect(served.version).toBe(3);
    expect(Buffer.concat(served.parts).toString('utf8')).toBe(third);
    expect(served.md5).toBe(contentMd5(third));
    expect((await reader.current('race'))!.document).toBe(third);
  });
  it('takes the chunks its process wrote from memory: no chunk read from the database, the committed bytes and MD5 served', async () => {
    const values = new Map<number, string>();
    const bigs = new Map<number, string>();
    for (let k = 0; k < 500; k++) values.set(k, `value ${k}`);
    const reads = { chunks: 0 };
    const counting = countingChunkReads(h, reads);
    const writer = new StateDocumentReadModel(counting, { written: h.written });
    const elsewhere = new StateDocumentReadModel(counting);
    for (let serial = 1; serial <= 6; serial++) {
      values.set(serial * 70, `changed in version ${serial}`);
      const text = body(serial, values, bigs);
      await h.commit('written', parseStateDocument(text));
      // Every other version unserved: its chunks are still taken from memory.
      if (serial % 2 === 1 && serial > 1) continue;
      reads.chunks = 0;
      const served = (await writer.currentBody('written'))!;
      expect(reads.chunks).toBe(0);
      expect(served.version).toBe(serial);
      expect(Buffer.concat(served.parts).toString('utf8')).toBe(text);
      expect(served.md5).toBe(contentMd5(text));
    }
    // A process that did not write them reads them.
    reads.chunks = 0;
    expect((await elsewhere.current('written'))!.document).toBe(body(6, values, bigs));
    expect(reads.chunks).toBeGreaterThan(0);
  });
  it('brings a document it holds up to date when asked, so the next GET reads no chunk; leaves a state it never served alone', async () => {
    const values = new Map<number, string>();
    const bigs = new Map<number, string>();
    for (let k = 0; k < 500; k++) values.set(k, `value ${k}`);
    await h.commit('held', parseStateDocument(body(1, values, bigs)));
    await h.commit('unheld', parseStateDocument(body(1, values, bigs)));
    const reads = { chunks: 0 };
    const counting = countingChunkReads(h, reads);
    const reader = new StateDocumentReadModel(counting);
    await reader.currentBody('held');

    values.set(250, 'changed in version 2');
    const second = body(2, values, bigs);
    await h.commit('held', parseStateDocument(second));
    await h.commit('unheld', parseStateDocument(second));

    reads.chunks = 0;
    await reader.refreshHeld('held');
    expect(reads.chunks).toBeGreaterThan(0);
    reads.chunks = 0;
    const served = (await reader.currentBody('held'))!;
    expect(reads.chunks).toBe(0);
    expect(served.version).toBe(2);
    expect(Buffer.concat(served.parts).toString('utf8')).toBe(second);
    expect(served.md5).toBe(contentMd5(second));

    await reader.refreshHeld('unheld');
    expect(reads.chunks).toBe(0);
    expect(Buffer.concat((await reader.currentBody('unheld'))!.parts).toString('utf8')).toBe(
      second,
    );
    expect(reads.chunks).toBeGreaterThan(0);
  });
  it('serves a state deleted and created again under the same name as its new versions, whether or not their bytes are the old ones', async () => {
    const values = new Map<number, string>();
    const bigs = new Map<number, string>();
    for (let k = 0; k < 300; k++) values.set(k, `value ${k}`);
    const first = body(1, values, bigs);
    await h.commit('again', parseStateDocument(first));
    await h.commit('again', parseStateDocument(body(2, values, bigs)));
    const reads = { chunks: 0 };
    const counting = countingChunkReads(h, reads);
    const reader = new StateDocumentReadModel(counting);
    expect((await reader.currentBody('again'))!.version).toBe(2);
    const before = await h.stateId('again');

    // Created again with other bytes: the new state's, not the held ones.
    await h.delete('again');
    expect(await reader.currentBody('again')).toBeNull();
    values.set(7, 'the new state');
    const other = body(1, values, bigs);
    await h.commit('again', parseStateDocument(other));
    const served = (await reader.currentBody('again'))!;
    expect(served.stateId).not.toBe(before);
    expect([served.version, Buffer.concat(served.parts).toString('utf8')]).toEqual([1, other]);
    expect(served.md5).toBe(contentMd5(other));

    // Created again with the bytes this reader holds: served from memory, as the new state's version.
    await h.commit('again', parseStateDocument(first));
    expect((await reader.currentBody('again'))!.version).toBe(2);
    await h.delete('again');
    await h.commit('again', parseStateDocument(first));
    reads.chunks = 0;
    const same = (await reader.currentBody('again'))!;
    expect(reads.chunks).toBe(0);
    expect(same.stateId).toBe(await h.stateId('again'));
    expect([same.version, Buffer.concat(same.parts).toString('utf8')]).toEqual([1, first]);
    expect(same.md5).toBe(contentMd5(first));
  });
});

describe('WrittenChunks beside the raw-state projector', () => {
  let h: StateHarness;

  beforeAll(async () => {
    h = await StateHarness.create();
  });
  afterAll(async () => {
    await h.close();
  });

  it('keeps the chunks of the documents the projector keeps, and of no other state', async () => {
    const written = new WrittenChunks();
    // Room in the projector's document cache for two states of 500 instances, not three.
    const budgets = { ...DEFAULT_CACHE_BUDGETS, documentInstances: 1200 };
    const runner = h.newRunner(h.projectorsWithRawState(budgets, written));
    const reads = { chunks: 0 };
    const reader = new StateDocumentReadModel(countingChunkReads(h, reads), { written });
    const values = new Map<number, string>();
    for (let k = 0; k < 500; k++) values.set(k, `value ${k}`);
    const stateIds: string[] = [];
    for (const name of ['kept-a', 'kept-b', 'kept-c']) {
      const text = body(1, values, new Map());
      await h.commit(name, parseStateDocument(text), {}, runner);
      // The GET right after its commit still takes every chunk from memory.
      reads.chunks = 0;
      const served = (await reader.currentBody(name))!;
      expect([reads.chunks, Buffer.concat(served.parts).toString('utf8')]).toEqual([0, text]);
      stateIds.push(await h.stateId(name));
    }
    // The first state's document left the projector's cache, and its chunks with it.
    expect(stateIds.map((id) => written.has(id))).toEqual([false, true, true]);
    // A state whose document alone is over the cache's budget keeps none.
    for (let k = 500; k < 1300; k++) values.set(k, `value ${k}`);
    await h.commit('kept-a', parseStateDocument(body(2, values, new Map())), {}, runner);
    expect(stateIds.map((id) => written.has(id))).toEqual([false, true, true]);
  });
});
