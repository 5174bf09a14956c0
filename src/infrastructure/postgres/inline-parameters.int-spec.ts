import { createTestDatabase, TestDatabase } from '../../../test/support/test-database';
import { Database } from './database';
import { inlineParameters } from './inline-parameters';

describe('parameters written into a statement', () => {
  let t: TestDatabase;
  let db: Database;
  beforeAll(async () => {
    t = await createTestDatabase();
    db = new Database(t.url, { max: 1 });
    await db.query('CREATE TABLE inlined (id int PRIMARY KEY, label text, doc jsonb, raw bytea)');
  });
  afterAll(async () => {
    await db.close();
    await t.drop();
  });

  const cases: [string, string, unknown[]][] = [
    [
      'quotes, backslashes, unicode and big numbers in text',
      'SELECT $1::text AS a, $2::text AS b, $3::bigint AS c',
      ["it's a 'quote'", 'C:\\path\\n and \\x00 as text', '9007199254740993'],
    ],
    [
      'arrays with nulls, quotes and braces, unnested',
      'SELECT x FROM unnest($1::text[]) WITH ORDINALITY AS u (x, n) ORDER BY n',
      [['a', null, 'b"c', '{d}', "e'f", 'g\\h']],
    ],
    [
      'json objects, booleans, nulls and numbers, typed by their context',
      "SELECT $1::jsonb -> 'k' AS k, $2::boolean AS yes, $3::int IS NULL AS none, $4 + 1 AS n",
      [{ k: ["x'y", 1.5, null] }, true, null, 41],
    ],
    [
      'a parameter used twice, one of ten, and quoted text around them',
      "SELECT $1 || ' $2 ' || $10 AS s, $1 = 'one' AS same, \"label\", " +
        'concat_ws($2::text, $3::int, $4::int, $5::int, $6::int, $7::int, $8::int, $9::int) AS c ' +
        "FROM (SELECT 'it''s' AS label) AS x",
      ['one', ',', 3, 4, 5, 6, 7, 8, 9, 'ten'],
    ],
  ];

  it.each(cases)('answers as the statement with parameters does: %s', async (_, text, values) => {
    const inlined = inlineParameters(text, values);
    expect(inlined).not.toBeNull();
    expect(await db.query(inlined!)).toEqual(await db.query(text, values));
  });

  it('writes the same row as the statement with parameters', async () => {
    const text = 'INSERT INTO inlined (id, label, doc, raw) VALUES ($1, $2, $3, $4)';
    const values = (id: number) => [
      id,
      "l'a\\bel ✓",
      { nested: { s: 'x"y' } },
      Buffer.from([0, 1, 254]),
    ];
    await db.query(text, values(1));
    await db.query(inlineParameters(text, values(2))!);
    const rows = await db.query('SELECT label, doc, raw FROM inlined ORDER BY id');
    expect(rows[1]).toEqual(rows[0]);
  });

  it('leaves alone what it cannot write in safely', () => {
    const refused: [string, unknown[]][] = [
      ['SELECT $1; SELECT 2', ['a']],
      ['SELECT $1 -- a comment', ['a']],
      ['SELECT $1 /* a comment */', ['a']],
      ["SELECT E'\\'' || $1", ['a']],
      ['DO $x$ BEGIN END $x$', []],
      ['SELECT $2', ['a']],
      ['SELECT $0', ['a']],
      ['SELECT a$1 FROM t', ['a']],
      ["SELECT 'unclosed", []],
      ['SELECT $1', ['a\0b']],
    ];
    for (const [text, values] of refused) expect(inlineParameters(text, values)).toBeNull();
    expect(inlineParameters('SELECT $1', ['x'.repeat(100)], 50)).toBeNull();
    expect(inlineParameters('SELECT $1', [['x'.repeat(60)]], 50)).toBeNull();
    expect(inlineParameters('SELECT $1', ['x'.repeat(10)], 50)).toBe(`SELECT '${'x'.repeat(10)}'`);
  });
});
