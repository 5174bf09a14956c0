import { createTestDatabase, TestDatabase } from '../../../test/support/test-database';
import { binaryText, binaryUuid, copyBinaryRows, copyField, copyRows } from './copy-rows';

describe('COPY rows', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase();
    await t.db.query('CREATE TABLE copied (id uuid, n int, label text, bytes bytea)');
  });
  afterAll(() => t.drop());
  beforeEach(() => t.db.query('TRUNCATE copied'));

  // Multi-byte text, COPY's separators, and one row longer than a write.
  const labels = Array.from({ length: 3000 }, (_, i) =>
    i === 1234 ? 'é漢😀\t\n\\'.repeat(60_000) : `${i}:${'é 漢 😀 \t \\ \n'.repeat(i % 50)}`,
  );

  it('text format: every row as it was given, however long or multi-byte', async () => {
    await t.db.transaction((tx) =>
      copyRows(
        tx,
        'copied',
        ['n', 'label'],
        labels.map((label, n) => [String(n), copyField(label)]),
      ),
    );
    const rows = await t.db.query<{ n: number; label: string }>(
      'SELECT n, label FROM copied ORDER BY n',
    );
    expect(rows.map((r) => r.label)).toEqual(labels);
  });

  it('binary format: bytes given in pieces arrive whole, with uuids, text and NULLs', async () => {
    const id = '0b4c7d3e-1111-4222-8333-444455556666';
    const pieces = (n: number) => [Buffer.from([0, 255, n % 256]), Buffer.from(labels[n], 'utf8')];
    await t.db.transaction((tx) =>
      copyBinaryRows(
        tx,
        'copied',
        ['id', 'label', 'bytes'],
        labels.map((label, n) => [n % 2 ? binaryUuid(id) : null, binaryText(label), pieces(n)]),
      ),
    );
    const rows = await t.db.query<{ id: string | null; label: string; bytes: Buffer }>(
      'SELECT id, label, bytes FROM copied',
    );
    expect(rows).toHaveLength(labels.length);
    for (const r of rows) {
      const n = labels.indexOf(r.label);
      expect(r.id).toBe(n % 2 ? id : null);
      expect(r.bytes).toEqual(Buffer.concat(pieces(n)));
    }
  });
});
