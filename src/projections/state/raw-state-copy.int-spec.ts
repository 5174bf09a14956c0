import {
  snapshotTables,
  StateHarness,
  testDocument,
  TestInstance,
} from '../../../test/support/state-harness';
import {
  appliedToEmptyCopies,
  handledEvents,
  recordingStatements,
  tableRows,
} from '../../../test/support/projector-batches';
import { dropShadowTables } from '../shadow-tables';
import {
  buildDocument,
  documentMeta,
  flattenInstances,
  stateDocumentText,
} from '../../domain/terraform';
import { RawStateProjector } from './raw-state.projector';

/**
 * Megabytes of served bytes, chunks of a few hundred kilobytes: a first
 * commit's chunks go by binary COPY. `changed` instances differ by version.
 */
function bigInstances(version: number, changed: number[] = []): TestInstance[] {
  return Array.from({ length: 400 }, (_, i) => ({
    name: `r${i % 7}`,
    key: i,
    // Escapes, multi-byte text and JSON's \u0000 in the bytes, and kilobytes each.
    input: `v${changed.includes(i) ? version : 1} ${i} é 漢 😀 \u0000 "q" \\ \n`.repeat(300),
  }));
}

describe('raw_state chunks written by binary COPY', () => {
  let h: StateHarness;

  beforeAll(async () => {
    h = await StateHarness.create();
    await h.commit('big', testDocument(1, bigInstances(1)));
  });
  afterAll(async () => {
    await dropShadowTables(h.db);
    await h.close();
  });

  it('serves the document byte for byte, after a rebuild too', async () => {
    const doc = testDocument(1, bigInstances(1));
    const expected = stateDocumentText(buildDocument(documentMeta(doc), flattenInstances(doc)));
    expect(Buffer.byteLength(expected)).toBeGreaterThan(1 << 20);
    expect((await h.documents.current('big'))!.document).toBe(expected);
    const tables = ['raw_state', 'raw_state_chunks'];
    const live = await snapshotTables(h.db, tables, ['updated_at']);
    await h.runner.rebuild();
    expect(await snapshotTables(h.db, tables, ['updated_at'])).toEqual(live);
    expect((await h.documents.current('big'))!.document).toBe(expected);
  });

  it('writes with COPY what INSERT writes, and a batch meeting chunks already there writes them by INSERT', async () => {
    const projector = new RawStateProjector(h.events);
    const events = await handledEvents(h, projector);
    const statements: string[] = [];
    const copied = await appliedToEmptyCopies(h.db, projector, (tx) =>
      new RawStateProjector(h.events).apply(events, recordingStatements(tx, statements)),
    );
    expect(
      statements.filter((s) => /^(SAVEPOINT kl_open_copy; )?COPY raw_state_chunks /.test(s)),
    ).toHaveLength(1);
    expect(statements.some((s) => s.startsWith('INSERT INTO raw_state_chunks'))).toBe(false);
    expect(copied).toEqual(await tableRows(h.db, projector.tables));
    // A chunk already stored (a redelivered batch): COPY cannot skip it, the INSERT does.
    const redelivered: string[] = [];
    const again = await appliedToEmptyCopies(h.db, projector, async (tx) => {
      const { rows } = await tx.query<{ live: string }>(
        'SELECT (current_schemas(false))[2] AS live',
      );
      await tx.query(
        `INSERT INTO raw_state_chunks
         SELECT * FROM "${rows[0].live}".raw_state_chunks ORDER BY chunk_id LIMIT 1`,
      );
      await new RawStateProjector(h.events).apply(events, recordingStatements(tx, redelivered));
    });
    expect(
      redelivered.filter((s) => /^(SAVEPOINT kl_open_copy; )?COPY raw_state_chunks /.test(s)),
    ).toHaveLength(1);
    expect(redelivered.some((s) => s.startsWith('INSERT INTO raw_state_chunks'))).toBe(true);
    expect(again).toEqual(copied);
  });

  it('writes a few changed instances by INSERT, however big their chunks', async () => {
    const doc = testDocument(2, bigInstances(2, [5, 150, 300]));
    await h.commit('big', doc);
    const expected = stateDocumentText(buildDocument(documentMeta(doc), flattenInstances(doc)));
    expect((await h.documents.current('big'))!.document).toBe(expected);
    // The second version applied by a projector holding the first one, as kld's does.
    const projector = new RawStateProjector(h.events);
    const events = await handledEvents(h, projector);
    const second = events.findIndex((e) => (e.data as { version?: number }).version === 2);
    const statements: string[] = [];
    let newBytes = 0;
    await appliedToEmptyCopies(h.db, projector, async (tx) => {
      await projector.apply(events.slice(0, second), tx);
      const first = (await tx.query<{ chunks: string[] }>('SELECT chunks FROM raw_state')).rows;
      await projector.apply(events.slice(second), recordingStatements(tx, statements));
      const { rows } = await tx.query<{ bytes: number }>(
        'SELECT sum(length(bytes))::int AS bytes FROM raw_state_chunks WHERE chunk_id <> ALL($1)',
        [first[0].chunks],
      );
      newBytes = rows[0].bytes;
    });
    expect(newBytes).toBeGreaterThan(1 << 20);
    // One statement writes the delta: chunks, manifest and the row's version checked.
    const added = statements.filter((q) => /INSERT INTO raw_state_chunks/.test(q));
    expect(added).toHaveLength(1);
    expect(statements.some((q) => /\bCOPY\b/.test(q))).toBe(false);
  });

  it('applies a commit again from the row when another process wrote the row past the version it holds', async () => {
    await h.commit('guard', testDocument(1, bigInstances(1)));
    await h.commit('guard', testDocument(2, bigInstances(2, [5])));
    await h.commit('guard', testDocument(3, bigInstances(3, [5, 9])));
    const stateId = await h.stateId('guard');
    const mine = new RawStateProjector(h.events);
    const events = await handledEvents(h, mine);
    const at = (version: number) =>
      events.findIndex((e) => {
        const d = e.data as { stateId?: string; version?: number };
        return d.stateId === stateId && d.version === version;
      });
    const once = new RawStateProjector(h.events);
    const expected = await appliedToEmptyCopies(h.db, once, (tx) => once.apply(events, tx));
    const rows = await appliedToEmptyCopies(h.db, mine, async (tx) => {
      // This process wrote version 1 and holds it; another one writes versions 2 and 3.
      await mine.apply(events.slice(0, at(2)), tx);
      const other = new RawStateProjector(h.events);
      await other.apply(events.slice(at(2)), tx);
      // Version 2 redelivered to this process: taken from its cache, refused
      // by the row, applied again from the row (nothing left to do).
      await expect(mine.apply(events.slice(at(2), at(3)), tx)).rejects.toThrow(
        /was not at version 1/,
      );
      await mine.apply(events.slice(at(2), at(3)), tx);
    });
    expect(rows).toEqual(expected);
  });
});
