import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { bootstrapToken } from '../support/auth';
import { KldProcess, startKld } from '../support/kld-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/**
 * POST /v1/query with a `query` token scoped to team-a/*: every read model,
 * view, function and the event log show only team-a's rows, whatever the
 * SQL tries. Team-b's state carries the marker "bmarker" in its name,
 * lineage, resource names, outputs and provider config, so a row of it
 * shows the marker in its text.
 */

jest.setTimeout(120_000);

let t: TestDatabase;
let kld: KldProcess;
let admin: string;
let teamA: string;
const a = `team-a/amarker-${randomUUID().slice(0, 8)}`;
const b = `team-b/bmarker-${randomUUID().slice(0, 8)}`;

const VIEWS = [
  'states',
  'state_versions',
  'resources',
  'current_resources',
  'resource_dependencies',
  'resource_edges',
  'resource_edge_sources',
  'outputs',
  'state_locks',
  'raw_state',
  'refresh_runs',
  'provider_configs',
  'event_log',
  'resource_reservations',
];

async function call(method: string, path: string, token: string, body?: unknown) {
  const r = await fetch(`${kld.url}${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, json: text ? JSON.parse(text) : null };
}

async function query(token: string, sql: string, params: unknown[] = []) {
  const r = await call('POST', '/v1/query', token, { sql, params });
  return r as {
    status: number;
    json: { rows?: unknown[][]; error?: { code: string; message: string } };
  };
}

function doc(marker: string): Record<string, unknown> {
  return {
    version: 4,
    terraform_version: '1.11.4',
    serial: 1,
    lineage: `${marker}-lineage`,
    outputs: { [`${marker}_out`]: { value: `${marker}-value`, type: 'string' } },
    resources: ['one', 'two'].map((n, i) => ({
      mode: 'managed',
      type: 'terraform_data',
      name: `${marker}_${n}`,
      provider: 'provider["terraform.io/builtin/terraform"]',
      instances: [
        {
          schema_version: 0,
          attributes: { id: `${marker}-${n}`, input: null, output: null, triggers_replace: null },
          sensitive_attributes: [],
          ...(i === 1 ? { dependencies: [`terraform_data.${marker}_one`] } : {}),
        },
      ],
    })),
    check_results: null,
  };
}

beforeAll(async () => {
  t = await createTestDatabase('kl_query_iso');
  const boot = bootstrapToken(t.url, 'root', ['admin', 'write:*', 'query']);
  expect(boot.code).toBe(0);
  admin = boot.secret;
  kld = await startKld({ KL_DATABASE_URL: t.url, KL_AUTH: 'on' });
  for (const [name, marker] of [
    [a, 'amarker'],
    [b, 'bmarker'],
  ]) {
    expect((await call('POST', `/v1/states/${name}`, admin, doc(marker))).status).toBe(200);
    const config = {
      state: name,
      source: 'hashicorp/aws',
      config: { region: marker },
      skip_schema_check: true,
    };
    expect((await call('PUT', '/v1/provider-configs', admin, config)).status).toBe(200);
    expect(
      (await call('POST', '/v1/refresh-runs', admin, { state: name, dry_run: true })).status,
    ).toBe(201);
  }
  const lock = {
    ID: randomUUID(),
    Operation: 'OperationTypeApply',
    Info: '',
    Who: 'bmarker@host',
    Version: '1.11.4',
    Created: '2026-11-30T00:00:00Z',
    Path: '',
  };
  expect((await call('LOCK', `/v1/states/${b}`, admin, lock)).status).toBe(200);
  expect(
    (
      await call('LOCK', `/v1/states/${a}`, admin, {
        ...lock,
        ID: randomUUID(),
        Who: 'amarker@host',
      })
    ).status,
  ).toBe(200);
  const created = await call('POST', '/v1/admin/tokens', admin, {
    name: 'team-a-query',
    scopes: ['query', 'read:team-a/*'],
  });
  teamA = created.json.token;
  // Statistics exist once analysed: pg_stats must not show them either.
  const owner = new Client({ connectionString: t.url });
  await owner.connect();
  await owner.query('ANALYZE');
  await owner.end();
});

afterAll(async () => {
  await kld?.stop();
  await t?.drop();
});

describe.each(VIEWS)('%s', (view) => {
  it("shows team-b's rows to an unrestricted token, and none to a team-a/* token", async () => {
    const sql = `SELECT x::text FROM ${view} x`;
    const all = await query(admin, sql);
    expect(all.status).toBe(200);
    expect(all.json.rows!.some(([r]) => String(r).includes('bmarker'))).toBe(true);
    expect(all.json.rows!.some(([r]) => String(r).includes('amarker'))).toBe(true);
    const mine = await query(teamA, sql);
    expect(mine.status).toBe(200);
    expect(mine.json.rows!.length).toBeGreaterThan(0);
    expect(mine.json.rows!.filter(([r]) => String(r).includes('bmarker'))).toEqual([]);
  });
});

it("raw_state_chunks shows a team-a/* token its documents' bytes and none of team-b's", async () => {
  const sql = `SELECT convert_from(bytes, 'UTF8') FROM raw_state_chunks`;
  const text = (rows: unknown[][]) => rows.map(([r]) => String(r)).join('');
  const all = await query(admin, sql);
  expect(text(all.json.rows!)).toContain('bmarker');
  const mine = await query(teamA, sql);
  expect(mine.status).toBe(200);
  expect(text(mine.json.rows!)).toContain('amarker');
  expect(text(mine.json.rows!)).not.toContain('bmarker');
});

it('resources_at answers nothing for a state the token may not read', async () => {
  expect(
    (await query(admin, 'SELECT address FROM resources_at($1, 1)', [b])).json.rows,
  ).toHaveLength(2);
  expect((await query(teamA, 'SELECT address FROM resources_at($1, 1)', [b])).json.rows).toEqual(
    [],
  );
  expect(
    (await query(teamA, 'SELECT address FROM resources_at($1, 1)', [a])).json.rows,
  ).toHaveLength(2);
});

it('blast_radius walks only the states the token may read', async () => {
  const walk = 'SELECT resource_address, depth, via FROM blast_radius($1, $2, $3)';
  expect(
    (await query(admin, walk, [b, 'terraform_data.bmarker_one', 'dependents'])).json.rows,
  ).toEqual([['terraform_data.bmarker_two', 1, 'terraform_data.bmarker_one']]);
  expect(
    (await query(admin, walk, [b, 'terraform_data.bmarker_two', 'dependencies'])).json.rows,
  ).toEqual([['terraform_data.bmarker_one', 1, 'terraform_data.bmarker_two']]);
  expect(
    (await query(teamA, walk, [b, 'terraform_data.bmarker_one', 'dependents'])).json.rows,
  ).toEqual([]);
  expect(
    (await query(teamA, walk, [a, 'terraform_data.amarker_one', 'dependents'])).json.rows,
  ).toEqual([['terraform_data.amarker_two', 1, 'terraform_data.amarker_one']]);
  const wrong = await query(teamA, walk, [a, 'terraform_data.amarker_one', 'sideways']);
  expect(wrong.status).toBe(400);
  expect(wrong.json.error!.message).toContain("direction must be 'dependents' or 'dependencies'");
});

it.each([
  ['the live tables by schema', 'SELECT name FROM public.states'],
  ['the live edge view by schema', 'SELECT * FROM public.resource_dependencies'],
  ['a CTE over them', 'WITH s AS (SELECT * FROM public.raw_state) SELECT name FROM s'],
  [
    'search_path changed in the statement',
    "SELECT set_config('search_path', 'public', false), (SELECT count(*) FROM public.states)",
  ],
  ['the event store', 'SELECT * FROM kl_events'],
  ['the unfiltered log', 'SELECT * FROM public.event_log'],
  ['the grants table', 'SELECT * FROM public.kl_query_grants'],
  ['writing the grants', "UPDATE public.kl_query_grants SET patterns = '{%}'"],
  ['SET ROLE', 'SET ROLE postgres'],
  ['set_config(role)', "SELECT set_config('role', 'postgres', false)"],
  [
    'a function of its own',
    "CREATE FUNCTION kl_query.leak() RETURNS int LANGUAGE sql AS 'SELECT 1'",
  ],
  ['the tokens', 'SELECT * FROM public.auth_tokens'],
])('refuses %s', async (_what, sql) => {
  const r = await query(teamA, sql, sql.includes('$1') ? [b] : []);
  expect(r.status).toBe(400);
  expect(r.json.error!.message).not.toContain('bmarker');
});

it('RESET, SET and a pid of its own change nothing that the filter reads', async () => {
  for (const sql of [
    'RESET ALL',
    'RESET ROLE',
    'SET search_path = public, kl_query',
    'DISCARD ALL',
  ]) {
    await query(teamA, sql);
    const r = await query(teamA, 'SELECT name FROM states');
    expect(r.json.rows).toEqual([[a]]);
  }
});

it('an error-raising predicate does not run on the hidden rows (security barrier)', async () => {
  const r = await query(
    teamA,
    "SELECT name FROM states WHERE 1 / (CASE WHEN name LIKE '%bmarker%' THEN 0 ELSE 1 END) = 1",
  );
  expect(r).toMatchObject({ status: 200, json: { rows: [[a]] } });
});

it("pg_stats shows no statistics of the read models' hidden rows", async () => {
  const r = await query(
    teamA,
    "SELECT count(*) FROM pg_stats WHERE most_common_vals::text LIKE '%bmarker%' OR histogram_bounds::text LIKE '%bmarker%'",
  );
  expect(r.json.rows).toEqual([[0]]);
});

it('without a query run, the reader sees nothing: no grant row is left behind', async () => {
  const owner = new Client({ connectionString: t.url });
  await owner.connect();
  try {
    const { rows } = await owner.query('SELECT count(*)::int AS n FROM kl_query_grants');
    expect(rows[0].n).toBe(0);
  } finally {
    await owner.end();
  }
});

it('a token without the query scope is refused (403)', async () => {
  const created = await call('POST', '/v1/admin/tokens', admin, {
    name: 'no-query',
    scopes: ['read:*'],
  });
  const r = await query(created.json.token, 'SELECT 1');
  expect(r.status).toBe(403);
});
