import * as fs from 'node:fs';
import * as path from 'node:path';
import { Client } from 'pg';
import { READER_ROLE } from '../../src/infrastructure/query/reader-role';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/** A relation as docs/sql.md or the database has it: column name → type. */
type Relations = Map<string, Map<string, string>>;

/**
 * Each `## name` or `## name (view)` section with its table of columns (a
 * row may name several: `added`, `changed`, `destroyed` | integer).
 */
function documentedRelations(sqlMd: string): Relations {
  const relations: Relations = new Map();
  for (const section of sqlMd.split(/^## /m).slice(1)) {
    const heading = /^([a-z_]+)(?: \(view\))?\n/.exec(section);
    if (!heading) continue;
    const columns = new Map(
      [...section.matchAll(/^\| (`\w+`(?:, `\w+`)*) \| ([^|]+?) \|/gm)].flatMap((m) =>
        [...m[1].matchAll(/`(\w+)`/g)].map((name) => [name[1], m[2]] as const),
      ),
    );
    relations.set(heading[1], columns);
  }
  // current_resources is described, not tabled: "`state_name` first, and every
  // `resources` column except `delete_version` and `delete_serial`".
  const resources = [...relations.get('resources')!].filter(
    ([column]) => column !== 'delete_version' && column !== 'delete_serial',
  );
  relations.set('current_resources', new Map([['state_name', 'text'], ...resources]));
  return relations;
}

/** The tables and views of schema kl_query whose columns kl_reader may select, with their types. */
async function readableRelations(url: string): Promise<Relations> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ relation: string; column: string; type: string }>(
      `SELECT c.relname AS relation, a.attname AS column, format_type(a.atttypid, a.atttypmod) AS type
         FROM pg_class c
         JOIN pg_namespace n ON n.oid = c.relnamespace
         JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
        WHERE n.nspname = 'kl_query' AND c.relkind IN ('r', 'v', 'm', 'p')
          AND has_column_privilege($1, c.oid, a.attnum, 'SELECT')
        ORDER BY c.relname, a.attnum`,
      [READER_ROLE],
    );
    const relations: Relations = new Map();
    for (const row of rows) {
      if (!relations.has(row.relation)) relations.set(row.relation, new Map());
      // The docs write PostgreSQL's short names.
      const type = row.type.replace('timestamp with time zone', 'timestamptz');
      relations.get(row.relation)!.set(row.column, type);
    }
    return relations;
  } finally {
    await client.end();
  }
}

const asRows = (relations: Relations) =>
  [...relations].flatMap(([relation, columns]) =>
    columns.size === 0
      ? [`${relation} (no columns documented)`]
      : [...columns].map(([column, type]) => `${relation}.${column} ${type}`),
  );

/** docs/sql.md against what `kl query` can read: every relation and column, with its type. */
describe('docs/sql.md', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase();
  });
  afterAll(() => t.drop());

  it('documents every table and view a query can read, column by column, with its type', async () => {
    const sqlMd = fs.readFileSync(path.join(__dirname, '../../docs/sql.md'), 'utf8');
    const documented = asRows(documentedRelations(sqlMd));
    const readable = asRows(await readableRelations(t.url));
    expect(readable.length).toBeGreaterThan(100);
    expect({
      undocumented: readable.filter((r) => !documented.includes(r)),
      notReadable: documented.filter((r) => !readable.includes(r)),
    }).toEqual({ undocumented: [], notReadable: [] });
  });
});
