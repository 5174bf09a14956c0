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

/** Over a mebibyte of served bytes: the chunks go by binary COPY. */
function bigInstances(version: number): TestInstance[] {
  return Array.from({ length: 400 }, (_, i) => ({
    name: `r${i % 7}`,
    key: i,
    // Escapes, multi-byte text and JSON's \u0000 in the bytes, and a few kilobytes each.
    input: `v${version} ${i} é 漢 😀 \u0000 "q" \\ \n`.repeat(100),
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
    expect(statements.filter((s) => s.startsWith('COPY raw_state_chunks'))).toHaveLength(1);
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
    expect(redelivered.filter((s) => s.startsWith('COPY raw_state_chunks'))).toHaveLength(1);
    expect(redelivered.some((s) => s.startsWith('INSERT INTO raw_state_chunks'))).toBe(true);
    expect(again).toEqual(copied);
  });
});
