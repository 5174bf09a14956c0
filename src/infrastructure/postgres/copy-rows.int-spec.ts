import { expectAlike } from '../../../test/support/expect-alike';
import { createTestDatabase, TestDatabase } from '../../../test/support/test-database';
import {
  binaryBool,
  binaryInt4,
  binaryInt8,
  binaryJsonb,
  binaryText,
  binaryUuid,
  copyBinaryRows,
  copyField,
  copyRows,
} from './copy-rows';

describe('COPY rows', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase();
    await t.db.query(
      'CREATE TABLE copied (id uuid, n int, label text, bytes bytea, big bigint, flag boolean, doc jsonb, exact json)',
    );
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
    const index = new Map(labels.map((label, n) => [label, n]));
    // One comparison of all rows: jest's matcher walks a Buffer byte by byte
    // (minutes over the 1.6 MB row, called per row).
    expectAlike(
      rows.map((r) => ({ id: r.id, bytes: r.bytes })),
      rows.map((r) => {
        const n = index.get(r.label) ?? -1;
        return { id: n % 2 ? id : null, bytes: Buffer.concat(pieces(n)) };
      }),
    );
  });

  it('binary format: strings in UTF-8 whatever their length, integers, booleans, json and jsonb', async () => {
    const doc = (n: number) => JSON.stringify({ label: labels[n], n, list: [n, 'é'] });
    await t.db.transaction((tx) =>
      copyBinaryRows(
        tx,
        'copied',
        ['n', 'label', 'big', 'flag', 'doc', 'exact'],
        labels.map((label, n) => [
          binaryInt4(n - 1500),
          n % 7 ? label : [binaryText('é'), label, ''],
          binaryInt8(n % 3 ? 2n ** 62n + BigInt(n) : -n),
          n % 5 ? binaryBool(n % 2 === 0) : null,
          binaryJsonb(doc(n)),
          `{"n": ${n}, "z": 1.50}`,
        ]),
      ),
    );
    const rows = await t.db.query<{
      n: number;
      label: string;
      big: string;
      flag: boolean | null;
      doc: unknown;
      exact: string;
    }>('SELECT n, label, big::text AS big, flag, doc, exact::text AS exact FROM copied ORDER BY n');
    expectAlike(
      rows,
      labels.map((label, i) => ({
        n: i - 1500,
        label: i % 7 ? label : `é${label}`,
        big: String(i % 3 ? 2n ** 62n + BigInt(i) : -i),
        flag: i % 5 ? i % 2 === 0 : null,
        doc: JSON.parse(doc(i)) as unknown,
        exact: `{"n": ${i}, "z": 1.50}`,
      })),
    );
  });

  it('binary format: a value its column cannot take is refused before it is sent', () => {
    expect(() => binaryInt4(2 ** 31)).toThrow(/not an integer/);
    expect(() => binaryInt4(1.5)).toThrow(/not an integer/);
    expect(() => binaryInt8(2 ** 63)).toThrow(/not a bigint/);
    expect(() => binaryInt8(2n ** 63n)).toThrow(/not a bigint/);
  });
});
