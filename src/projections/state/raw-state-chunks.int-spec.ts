import {
  snapshotTables,
  StateHarness,
  testDocument,
  TestInstance,
} from '../../../test/support/state-harness';
import { createEmptyDatabase, quietLogger } from '../../../test/support/test-database';
import { loadMigrations, migrate } from '../../infrastructure/postgres/migrator';
import { DocumentTextMemo } from '../../application/state/document-text-memo';
import {
  buildDocument,
  documentMeta,
  flattenInstances,
  parseStateDocument,
  stateDocumentText,
} from '../../domain/terraform';
import { StateDocumentReadModel } from '../../infrastructure/read-models/state-document-read-model';
import { stateProjectors } from '.';
import { fuzzSeeds, random, withSeed } from '../../../test/support/seeded-random';

const VERSIONS = 40;

describe.each(fuzzSeeds([14]))(
  'raw_state in chunks (property: served = rebuilt, byte for byte, every version) (seed %i)',
  (seed) => {
    let h: StateHarness;

    beforeAll(async () => {
      h = await StateHarness.create();
    });
    afterAll(async () => {
      await h.close();
    });

    const manifest = async (name: string) => {
      const [row] = await h.db.query<{ state_id: string; chunks: string[] }>(
        'SELECT state_id, chunks FROM raw_state WHERE name = $1',
        [name],
      );
      const stored = await h.db.query<{ chunk_id: string }>(
        'SELECT chunk_id FROM raw_state_chunks WHERE state_id = $1 ORDER BY chunk_id',
        [row.state_id],
      );
      return { ids: row.chunks, stored: stored.map((s) => s.chunk_id) };
    };

    it('serves every version of a randomly edited state exactly as a rebuild from its lifecycles, storing only its manifest chunks', () =>
      withSeed(seed, async () => {
        const r = random(seed);
        const instances = new Map<string, TestInstance>();
        // Big enough to be cut in many chunks whatever the seed: a chunk ends after 1 instance in
        // 64, by the instance's digest, so 1,500 instances make about 23 (4 or fewer: ~1e-6).
        for (let i = 0; i < 1500; i++) {
          instances.set(`${i}`, { name: `r${i % 17}`, key: i, input: `v0-${i}` });
        }
        let before: string[] = [];
        let cold = 0;
        const received = new DocumentTextMemo();
        let previousObjects = new Set<object>();
        let shared = 0;
        for (let version = 1; version <= VERSIONS; version++) {
          // One to ten instances changed, added or removed; now and then many.
          const edits = r() < 0.1 ? 150 : 1 + Math.floor(r() * 10);
          for (let e = 0; e < edits; e++) {
            const key = Math.floor(r() * 2000);
            const op = r();
            if (op < 0.2) instances.delete(`${key}`);
            else instances.set(`${key}`, { name: `r${key % 17}`, key, input: `v${version}-${e}` });
          }
          // Received as kld receives a POST: the body parsed reusing the previous body's bytes.
          const body = Buffer.from(
            stateDocumentText(testDocument(version, [...instances.values()])),
          );
          const doc = received.parse('prop', body, (b) => b.toString('utf8'));
          expect(doc).toEqual(parseStateDocument(body.toString('utf8')));
          const objects = doc.resources.flatMap((res) => res.instances);
          shared += objects.filter((o) => previousObjects.has(o)).length;
          previousObjects = new Set(objects);
          // Every fifth commit is projected by a replica with nothing cached.
          const runner = version % 5 === 0 ? h.newRunner(stateProjectors(h.events)) : h.runner;
          if (runner !== h.runner) cold++;
          await h.commit('prop', doc, {}, runner);

          const served = (await h.documents.current('prop'))!.document;
          const fresh = (await new StateDocumentReadModel(h.db).current('prop'))!.document;
          const rebuilt = await h.documents.atVersion('prop', version);
          const expected = stateDocumentText(
            buildDocument(documentMeta(doc), flattenInstances(doc)),
          );
          expect(served).toBe(rebuilt);
          expect(fresh).toBe(rebuilt);
          expect(served).toBe(expected);

          const { ids, stored } = await manifest('prop');
          expect(stored).toEqual([...new Set(ids)].sort());
          if (edits <= 10 && version > 1 && version % 5 !== 0 && (version - 1) % 5 !== 0) {
            // A small delta rewrites a few chunks, not the document: the first chunk (it holds the
            // serial) and at most two around each edit (one cut point more or less).
            expect(ids.filter((id) => !before.includes(id)).length).toBeLessThanOrEqual(
              1 + 2 * edits,
            );
            expect(ids.length).toBeGreaterThan(4);
          }
          before = ids;
        }
        expect(cold).toBe(VERSIONS / 5);
        // The fast path ran: most instances came back as the previous version's objects.
        expect(shared).toBeGreaterThan(VERSIONS * 300);
      }));

    it('holds the same rows after a rebuild from the log, and none of a deleted state', async () => {
      const live = await snapshotTables(h.db, ['raw_state', 'raw_state_chunks'], ['updated_at']);
      await h.runner.rebuild();
      expect(await snapshotTables(h.db, ['raw_state', 'raw_state_chunks'], ['updated_at'])).toEqual(
        live,
      );
      const stateId = await h.stateId('prop');
      await h.delete('prop');
      expect(
        await h.db.query('SELECT chunk_id FROM raw_state_chunks WHERE state_id = $1', [stateId]),
      ).toEqual([]);
    });
  },
);

it('migration 019 turns each stored document into one chunk that serves the same bytes', async () => {
  const t = await createEmptyDatabase('kl_chunks_019');
  try {
    const before = loadMigrations().filter((m) => m.id < 19);
    await migrate(t.url, quietLogger, before);
    const id = '00000000-0000-4000-8000-000000000019';
    const text = '{\n  "version": 4,\n  "serial": 3,\n  "note": "é 漢"\n}\n';
    await t.db.query(
      `INSERT INTO states (state_id, name, created_at, current_version, updated_at)
       VALUES ($1, 'old', now(), 1, now())`,
      [id],
    );
    await t.db.query(
      `INSERT INTO raw_state (state_id, name, version, serial, document, md5, updated_at)
       VALUES ($1, 'old', 1, 3, $2, 'x', now())`,
      [id, text],
    );
    await migrate(t.url, quietLogger);
    const served = await new StateDocumentReadModel(t.db).current('old');
    expect(served!.document).toBe(text);
    expect(await t.db.query('SELECT count(*)::int AS n FROM raw_state_chunks')).toEqual([{ n: 1 }]);
  } finally {
    await t.drop();
  }
});
