import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { KldProcess, startKld } from '../support/kld-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { oneResourceState } from '../../bench/support/one-resource-state';

/**
 * POST /v1/query against a real kld: user SQL runs as kl_reader, so every
 * attempt to write, to reach the event store or to climb back to the owner
 * is refused by PostgreSQL with a clean 400, and nothing changes.
 */

jest.setTimeout(60_000);

let t: TestDatabase;
let kld: KldProcess;
const state = `sandbox-${randomUUID().slice(0, 8)}`;

interface QueryAnswer {
  status: number;
  body: {
    columns?: { name: string; type: string }[];
    rows?: unknown[][];
    truncated?: boolean;
    error?: { code: string; message: string };
  };
}

async function query(body: Record<string, unknown>): Promise<QueryAnswer> {
  const r = await fetch(`${kld.url}/v1/query`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: r.status, body: (await r.json()) as QueryAnswer['body'] };
}

function doc(serial: number, count: number): Record<string, unknown> {
  const attributes = (i: number) => ({
    id: `id-${i}`,
    input: null,
    output: null,
    triggers_replace: null,
  });
  return oneResourceState({ serial, count, lineage: 'sandbox-lineage', attributes });
}

/** Row counts of everything a hostile query might try to change, as the owner sees them. */
async function counts(): Promise<Record<string, number>> {
  const tables = [
    'kl_events',
    'kl_streams',
    'kl_migrations',
    'states',
    'state_versions',
    'resources',
  ];
  const out: Record<string, number> = {};
  for (const table of tables) {
    out[table] = Number((await t.db.query(`SELECT count(*) AS n FROM ${table}`))[0].n);
  }
  return out;
}

beforeAll(async () => {
  t = await createTestDatabase('kl_query_sandbox');
  kld = await startKld({ KL_DATABASE_URL: t.url });
  for (const [serial, count] of [
    [1, 3],
    [2, 5],
  ]) {
    const r = await fetch(`${kld.url}/v1/states/${state}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(doc(serial, count)),
    });
    expect(r.status).toBe(200);
  }
});

afterAll(async () => {
  await kld?.stop();
  await t?.drop();
});

describe('a good query', () => {
  it('returns columns with their types and rows, with parameters bound', async () => {
    const r = await query({
      sql: `SELECT address, create_serial, 2::numeric / 8 AS quarter
              FROM current_resources WHERE state_name = $1 ORDER BY address LIMIT $2`,
      params: [state, 2],
    });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      columns: [
        { name: 'address', type: 'text' },
        { name: 'create_serial', type: 'bigint' },
        { name: 'quarter', type: 'numeric' },
      ],
      rows: [
        ['terraform_data.x[0]', 1, 0.25],
        ['terraform_data.x[1]', 1, 0.25],
      ],
      truncated: false,
    });
  });

  it('truncates at max_rows and says so', async () => {
    const r = await query({ sql: 'SELECT g FROM generate_series(1, 50) g', max_rows: 7 });
    expect(r.status).toBe(200);
    expect(r.body.rows).toEqual([[1], [2], [3], [4], [5], [6], [7]]);
    expect(r.body.truncated).toBe(true);
    const exact = await query({ sql: 'SELECT g FROM generate_series(1, 7) g', max_rows: 7 });
    expect(exact.body.truncated).toBe(false);
  });

  it('returns bigints and numerics as numbers when exact, else as strings', async () => {
    const r = await query({
      sql: `SELECT 9007199254740991::bigint AS safe, 9007199254740993::bigint AS big,
                   1.50::numeric AS dec, 0.1000000000000000000001::numeric AS fine`,
    });
    expect(r.body.rows).toEqual([
      [9007199254740991, '9007199254740993', 1.5, '0.1000000000000000000001'],
    ]);
  });

  it('answers with the helpers: resources_at and event_log', async () => {
    const at1 = await query({ sql: 'SELECT count(*) FROM resources_at($1, 1)', params: [state] });
    const at2 = await query({ sql: 'SELECT count(*) FROM resources_at($1, 2)', params: [state] });
    expect([at1.body.rows, at2.body.rows]).toEqual([[[3]], [[5]]]);
    const log = await query({
      sql: `SELECT type, actor, occurred_at IS NOT NULL AS timed FROM event_log
             WHERE stream LIKE 'state-%' AND type = 'ApplyCommitted' ORDER BY position`,
    });
    expect(log.body.rows).toEqual([
      ['ApplyCommitted', 'anonymous', true],
      ['ApplyCommitted', 'anonymous', true],
    ]);
  });
});

describe('refused cleanly, leaving the data untouched', () => {
  const refusals: [string, Record<string, unknown>, string, RegExp][] = [
    [
      'INSERT',
      {
        sql: "INSERT INTO states (state_id, name, created_at, updated_at) VALUES (gen_random_uuid(), 'x', now(), now())",
      },
      'QUERY.FORBIDDEN',
      /read-only|permission denied/,
    ],
    [
      'UPDATE',
      { sql: "UPDATE states SET name = 'hijacked'" },
      'QUERY.FORBIDDEN',
      /read-only|permission denied/,
    ],
    ['DELETE', { sql: 'DELETE FROM resources' }, 'QUERY.FORBIDDEN', /read-only|permission denied/],
    [
      'writing CTE',
      { sql: 'WITH d AS (DELETE FROM resources RETURNING 1) SELECT count(*) FROM d' },
      'QUERY.FORBIDDEN',
      /read-only|permission denied/,
    ],
    [
      'CREATE TABLE',
      { sql: 'CREATE TABLE evil (a int)' },
      'QUERY.FORBIDDEN',
      /read-only|permission denied/,
    ],
    ['DROP TABLE', { sql: 'DROP TABLE resources' }, 'QUERY.FORBIDDEN', /read-only|must be owner/],
    ['TRUNCATE', { sql: 'TRUNCATE states' }, 'QUERY.FORBIDDEN', /read-only|permission denied/],
    [
      'reading kl_events',
      { sql: 'SELECT * FROM kl_events' },
      'QUERY.FORBIDDEN',
      /permission denied for table kl_events/,
    ],
    [
      'reading kl_streams',
      { sql: 'SELECT * FROM kl_streams' },
      'QUERY.FORBIDDEN',
      /permission denied for table kl_streams/,
    ],
    [
      'reading kl_snapshots',
      { sql: 'SELECT * FROM kl_snapshots' },
      'QUERY.FORBIDDEN',
      /permission denied/,
    ],
    [
      'reading kl_checkpoints',
      { sql: 'SELECT * FROM kl_checkpoints' },
      'QUERY.FORBIDDEN',
      /permission denied/,
    ],
    [
      'reading kl_migrations',
      { sql: 'SELECT * FROM kl_migrations' },
      'QUERY.FORBIDDEN',
      /permission denied for table kl_migrations/,
    ],
    [
      'RESET ROLE then a write',
      { sql: 'RESET ROLE; DELETE FROM resources' },
      'QUERY.INVALID',
      /one SQL statement/,
    ],
    [
      'RESET ROLE then a read',
      { sql: 'RESET ROLE; SELECT * FROM kl_events' },
      'QUERY.INVALID',
      /one SQL statement/,
    ],
    [
      'set_config role',
      { sql: "SELECT set_config('role', 'postgres', false)" },
      'QUERY.FORBIDDEN',
      /permission denied to set role/,
    ],
    ['SET ROLE', { sql: 'SET ROLE postgres' }, 'QUERY.FORBIDDEN', /permission denied to set role/],
    [
      'SET SESSION AUTHORIZATION',
      { sql: 'SET SESSION AUTHORIZATION postgres' },
      'QUERY.FORBIDDEN',
      /permission denied/,
    ],
    ['multi-statement', { sql: 'SELECT 1; SELECT 2' }, 'QUERY.INVALID', /one SQL statement/],
    [
      'commit then write',
      { sql: 'COMMIT; DELETE FROM states' },
      'QUERY.INVALID',
      /one SQL statement/,
    ],
    [
      'COPY TO PROGRAM',
      { sql: "COPY (SELECT 1) TO PROGRAM 'touch /tmp/kl-pwned'" },
      'QUERY.FORBIDDEN',
      /permission denied/,
    ],
    [
      'COPY FROM PROGRAM',
      { sql: "COPY states FROM PROGRAM 'echo'" },
      'QUERY.FORBIDDEN',
      /read-only|permission denied/,
    ],
    [
      'pg_read_file',
      { sql: "SELECT pg_read_file('/etc/passwd')" },
      'QUERY.FORBIDDEN',
      /permission denied/,
    ],
    [
      'ALTER ROLE self',
      { sql: 'ALTER ROLE kl_reader SET default_transaction_read_only = off' },
      'QUERY.FORBIDDEN',
      /read-only|permission denied/,
    ],
    [
      'syntax error',
      { sql: 'SELEC 1' },
      'QUERY.INVALID',
      /syntax error at or near "SELEC" \(at character 1\)/,
    ],
    [
      'unknown column',
      { sql: 'SELECT nope FROM states' },
      'QUERY.INVALID',
      /column "nope" does not exist \(at character 8\)/,
    ],
  ];

  it.each(refusals)('%s', async (_what, body, code, message) => {
    const before = await counts();
    const r = await query(body);
    expect(r.status).toBe(400);
    expect(r.body).toEqual({ error: { code, message: expect.stringMatching(message) } });
    expect(await counts()).toEqual(before);
  });

  it('cancels a statement that runs past timeout_ms, even one that lifts its own timeout', async () => {
    for (const sql of [
      'SELECT pg_sleep(5)',
      "SELECT set_config('statement_timeout', '0', true), pg_sleep(5)",
    ]) {
      const started = Date.now();
      const r = await query({ sql, timeout_ms: 300 });
      expect(Date.now() - started).toBeLessThan(4_000);
      expect(r.status).toBe(400);
      expect(r.body.error).toEqual({
        code: 'QUERY.TIMEOUT',
        message: expect.stringContaining('300 ms'),
      });
    }
  });

  it('refuses an answer larger than 64 MiB, whatever carries it, and goes on serving', async () => {
    for (const sql of [
      // One value past V8's longest string: node-postgres would throw in its socket handler.
      "SELECT repeat('x', 600000000)",
      // Many rows, each small.
      "SELECT repeat('y', 1000000) FROM generate_series(1, 100)",
      // A notice, and an error quoting the value it could not read.
      "DO $$BEGIN RAISE NOTICE '%', repeat('n', 100000000); END$$",
      "SELECT repeat('9', 100000000)::int",
    ]) {
      const r = await query({ sql, max_rows: 100_000 });
      expect({ sql, status: r.status, error: r.body.error }).toEqual({
        sql,
        status: 400,
        error: { code: 'QUERY.TOO_LARGE', message: expect.stringContaining('64 MiB') },
      });
    }
    // Right under the bound is an answer.
    const fits = await query({
      sql: "SELECT repeat('z', 1000000) FROM generate_series(1, 60)",
      max_rows: 100_000,
    });
    expect({ status: fits.status, rows: fits.body.rows?.length }).toEqual({
      status: 200,
      rows: 60,
    });
    const ready = await fetch(`${kld.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(kld.output()).not.toContain('unhandled error');
  });

  it('cancels a query that takes an advisory lock (a projector’s), and writes go on', async () => {
    const sqls = [
      // The key the state-catalog projector locks (projection-runner LOCK_NAMESPACE).
      "SELECT pg_advisory_xact_lock(7300422, hashtext('state-catalog')), pg_sleep(20)",
      // The same through SQL text no reading of the query would see.
      "SELECT query_to_xml('SELECT pg_advisory_lock(7300422, hashtext(''state-raw'')), pg_sleep(20)', true, false, '')",
    ];
    for (const [i, sql] of sqls.entries()) {
      const held = query({ sql, timeout_ms: 60_000 });
      const commit = await fetch(`${kld.url}/v1/states/${state}-locked-${i}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(doc(1, 1)),
      });
      expect(commit.status).toBe(200);
      const r = await held;
      expect({ sql, status: r.status, code: r.body.error?.code }).toEqual({
        sql,
        status: 400,
        code: 'QUERY.FORBIDDEN',
      });
    }
    const left = await t.db.query(
      `SELECT count(*) AS n FROM pg_locks l JOIN pg_stat_activity a USING (pid)
        WHERE l.locktype = 'advisory' AND a.usename = 'kl_reader'`,
    );
    expect(Number(left[0].n)).toBe(0);
  });

  it('leaves nothing behind on the pooled session (advisory locks, settings)', async () => {
    await query({ sql: 'SELECT pg_advisory_lock(4242)' });
    await query({ sql: "SELECT set_config('search_path', 'pg_catalog', false)" });
    const locks = await t.db.query(
      "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242",
    );
    expect(Number(locks[0].n)).toBe(0);
    // search_path was reset: the read models still resolve unqualified.
    const r = await query({ sql: 'SELECT count(*) FROM states' });
    expect(r.status).toBe(200);
  });

  it('refuses malformed requests with REQUEST.INVALID', async () => {
    for (const body of [
      {},
      { sql: '' },
      { sql: 'SELECT 1', max_rows: 0 },
      { sql: 'SELECT 1', timeout_ms: 'x' },
      { sql: 'SELECT 1', params: 'x' },
      { sql: 'SELECT 1', nope: 1 },
    ]) {
      const r = await query(body);
      expect(r.status).toBe(400);
      expect(r.body.error?.code).toBe('REQUEST.INVALID');
    }
    const notJson = await fetch(`${kld.url}/v1/query`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: '{',
    });
    expect(notJson.status).toBe(400);
  });

  it('runs as kl_reader, a plain role that a guessed password does not open', async () => {
    const r = await query({ sql: 'SELECT current_user, session_user' });
    expect(r.body.rows).toEqual([['kl_reader', 'kl_reader']]);
    const role = await t.db.query(
      "SELECT rolsuper, rolinherit, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = 'kl_reader'",
    );
    expect(role).toEqual([
      { rolsuper: false, rolinherit: false, rolcreaterole: false, rolcreatedb: false },
    ]);
    const url = new URL(t.url);
    url.username = 'kl_reader';
    url.password = 'kl_reader';
    const guess = new Client({ connectionString: url.toString() });
    guess.on('error', () => undefined);
    await expect(guess.connect()).rejects.toThrow(/password authentication failed/);
    await guess.end().catch(() => undefined);
  });
});
