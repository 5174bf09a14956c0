import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { KldProcess, startKld } from '../support/kld-process';
import { launches, launchRecordingMirror } from '../support/provider-launches';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/**
 * The refresh REST contract `kl refresh` is written against, spoken by hand
 * to a real `kld serve`: runs, results, the committing finish, drift,
 * provider configs and schemas, and the server-side refresh route.
 */

jest.setTimeout(60_000);

let t: TestDatabase;
let kld: KldProcess;

beforeAll(async () => {
  t = await createTestDatabase('kl_refresh_api');
  kld = await startKld({ KL_DATABASE_URL: t.url });
});

afterAll(async () => {
  await kld?.stop();
  await t?.drop();
});

interface Answer {
  status: number;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- JSON under test
}

function api(method: string, path: string, body?: unknown): Promise<Answer> {
  return api2(kld, method, path, body);
}

/** `api` against another kld of the suite. */
async function api2(
  server: KldProcess,
  method: string,
  path: string,
  body?: unknown,
): Promise<Answer> {
  const r = await fetch(`${server.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', 'x-kilolock-actor': 'tester' },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, body: text === '' ? null : JSON.parse(text) };
}

const unique = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;
const LINEAGE = 'lineage-refresh';

/** Three terraform_data instances; `inputs` are their input values. */
function doc(serial: number, inputs: string[]) {
  return {
    version: 4,
    terraform_version: '1.11.4',
    serial,
    lineage: LINEAGE,
    outputs: {},
    resources: [
      {
        mode: 'managed',
        type: 'terraform_data',
        name: 'web',
        provider: 'provider["terraform.io/builtin/terraform"]',
        instances: inputs.map((input, i) => ({
          index_key: i,
          schema_version: 0,
          attributes: { id: `id-${i}`, input: { value: input, type: 'string' } },
          sensitive_attributes: [],
        })),
      },
    ],
    check_results: null,
  };
}

const result = (i: number, outcome: string, paths: string[] = []) => ({
  address: `terraform_data.web[${i}]`,
  provider: 'provider["terraform.io/builtin/terraform"]',
  outcome,
  before_hash: `b${i}`,
  after_hash: outcome === 'failed' ? null : `a${i}`,
  changed_paths: paths,
  ...(outcome === 'failed' ? { error: 'read failed' } : {}),
});

const lockInfo = (id: string) => ({
  ID: id,
  Operation: 'OperationTypeRefresh',
  Info: '',
  Who: 'tester@host',
  Version: 'test',
  Created: new Date().toISOString(),
  Path: '',
});

async function terraformPost(name: string, document: unknown, lockId?: string) {
  const query = lockId ? `?ID=${lockId}` : '';
  return api('POST', `/v1/states/${name}${query}`, document);
}

async function serialOf(name: string): Promise<number> {
  const r = await fetch(`${kld.url}/v1/states/${name}`);
  return ((await r.json()) as { serial: number }).serial;
}

const expectError = (a: Answer, status: number, code: string) => {
  expect({ status: a.status, code: a.body?.error?.code }).toEqual({ status, code });
  expect(typeof a.body.error.message).toBe('string');
};

describe('refresh runs', () => {
  const name = unique('team/rf');
  let runId: string;

  beforeAll(async () => {
    expect((await terraformPost(name, doc(1, ['a', 'b', 'c']))).status).toBe(200);
  });

  it('refuses a run for a missing state, and a malformed start', async () => {
    expectError(
      await api('POST', '/v1/refresh-runs', { state: 'nope', dry_run: false }),
      404,
      'STATE.NOT_FOUND',
    );
    expectError(
      await api('POST', '/v1/refresh-runs', { state: name, dry_run: 'yes' }),
      400,
      'REQUEST.INVALID',
    );
    expectError(await api('POST', '/v1/refresh-runs', '{not json'), 400, 'REQUEST.INVALID');
  });

  it('runs a refresh under the terraform lock and commits its document', async () => {
    expect((await api('LOCK', `/v1/states/${name}`, lockInfo('L1'))).status).toBe(200);
    const started = await api('POST', '/v1/refresh-runs', {
      state: name,
      dry_run: false,
      actor: 'nightly',
      lock_id: 'L1',
    });
    expect(started.status).toBe(201);
    expect(started.body).toEqual({
      run_id: expect.any(String),
      state_id: expect.any(String),
      from_version: 1,
      from_serial: 1,
    });
    runId = started.body.run_id;

    const recorded = await api('POST', `/v1/refresh-runs/${runId}/results`, {
      results: [
        result(0, 'drifted', ['input.value']),
        result(1, 'unchanged'),
        result(2, 'drifted', ['input.value']),
      ],
    });
    expect(recorded).toEqual({ status: 200, body: { recorded: 3 } });
    expect((await api('GET', `/v1/refresh-runs/${runId}`)).body).toMatchObject({
      run_id: runId,
      state_name: name,
      status: 'running',
      checked: 3,
      changed: 2,
      failed: 0,
      actor: 'nightly',
      dry_run: false,
    });

    const finished = await api('POST', `/v1/refresh-runs/${runId}/finish`, {
      status: 'succeeded',
      document: doc(2, ['A', 'b', 'C']),
      lock_id: 'L1',
    });
    expect(finished).toEqual({
      status: 200,
      body: {
        run_id: runId,
        status: 'succeeded',
        to_version: 2,
        checked: 3,
        changed: 2,
        failed: 0,
        normalized: 0,
        skipped: 0,
      },
    });
    expect(await serialOf(name)).toBe(2);
    expect((await api('UNLOCK', `/v1/states/${name}`, lockInfo('L1'))).status).toBe(200);
    expect((await api('GET', `/v1/refresh-runs/${runId}`)).body).toMatchObject({
      status: 'succeeded',
      to_version: 2,
      to_serial: 2,
      finished_at: expect.any(String),
    });
  });

  it('shows what the refresh changed as drift', async () => {
    const drift = await api('GET', `/v1/drift?state=${encodeURIComponent(name)}`);
    expect(drift.status).toBe(200);
    expect(drift.body.drift).toEqual([
      {
        address: 'terraform_data.web[0]',
        type: 'terraform_data',
        changed_paths: ['input.value'],
        previous_attributes: { id: 'id-0', input: { value: 'a', type: 'string' } },
        current_attributes: { id: 'id-0', input: { value: 'A', type: 'string' } },
        detected_serial: 2,
        detected_version: 2,
        refresh_run_id: runId,
      },
      expect.objectContaining({ address: 'terraform_data.web[2]', changed_paths: ['input.value'] }),
    ]);
    expectError(await api('GET', '/v1/drift?state=nope'), 404, 'STATE.NOT_FOUND');
  });

  it('refuses results and a second finish once a run has finished, and unknown runs', async () => {
    expectError(
      await api('POST', `/v1/refresh-runs/${runId}/results`, { results: [result(0, 'unchanged')] }),
      409,
      'REFRESH.FINISHED',
    );
    expectError(
      await api('POST', `/v1/refresh-runs/${runId}/finish`, { status: 'failed' }),
      409,
      'REFRESH.FINISHED',
    );
    const unknown = randomUUID();
    expectError(await api('GET', `/v1/refresh-runs/${unknown}`), 404, 'REFRESH.NOT_FOUND');
    expectError(await api('GET', '/v1/refresh-runs/not-a-uuid'), 404, 'REFRESH.NOT_FOUND');
    expectError(
      await api('POST', `/v1/refresh-runs/${unknown}/results`, {
        results: [result(0, 'unchanged')],
      }),
      404,
      'REFRESH.NOT_FOUND',
    );
    expectError(
      await api('POST', `/v1/refresh-runs/${unknown}/finish`, { status: 'failed' }),
      404,
      'REFRESH.NOT_FOUND',
    );
    expectError(
      await api('POST', `/v1/refresh-runs/${unknown}/results`, {
        results: [{ address: 'x', outcome: 'odd' }],
      }),
      400,
      'REQUEST.INVALID',
    );
  });

  it('commits nothing for a dry run', async () => {
    const { body } = await api('POST', '/v1/refresh-runs', { state: name, dry_run: true });
    await api('POST', `/v1/refresh-runs/${body.run_id}/results`, {
      results: [result(1, 'drifted', ['input'])],
    });
    const finished = await api('POST', `/v1/refresh-runs/${body.run_id}/finish`, {
      status: 'succeeded',
      document: doc(3, ['A', 'B', 'C']),
    });
    expect(finished.body).toMatchObject({ status: 'succeeded', to_version: null, changed: 1 });
    expect(await serialOf(name)).toBe(2);
  });

  it('commits nothing when an instance failed, and records the run as failed', async () => {
    const { body } = await api('POST', '/v1/refresh-runs', { state: name, dry_run: false });
    await api('POST', `/v1/refresh-runs/${body.run_id}/results`, {
      results: [result(0, 'unchanged'), result(1, 'failed')],
    });
    const finished = await api('POST', `/v1/refresh-runs/${body.run_id}/finish`, {
      status: 'succeeded',
      document: doc(3, ['A', 'B', 'C']),
    });
    expect(finished.body).toEqual({
      run_id: body.run_id,
      status: 'failed',
      to_version: null,
      checked: 2,
      changed: 0,
      failed: 1,
      normalized: 0,
      skipped: 0,
    });
    expect(await serialOf(name)).toBe(2);
  });

  it('refuses to commit over a state that changed during the refresh; terraform clears the drift', async () => {
    const { body } = await api('POST', '/v1/refresh-runs', { state: name, dry_run: false });
    expect(body.from_version).toBe(2);
    expect((await terraformPost(name, doc(3, ['x', 'y', 'z']))).status).toBe(200);
    const finished = await api('POST', `/v1/refresh-runs/${body.run_id}/finish`, {
      status: 'succeeded',
      document: doc(3, ['A', 'b', 'C']),
    });
    expectError(finished, 409, 'REFRESH.STATE_CHANGED');
    expect(finished.body.error.message).toBe('state changed during refresh (version 2 → 3)');
    expect((await api('GET', `/v1/refresh-runs/${body.run_id}`)).body).toMatchObject({
      status: 'failed',
      to_version: null,
      error_summary: 'state changed during refresh (version 2 → 3)',
    });
    const served = (await (await fetch(`${kld.url}/v1/states/${name}`)).json()) as ReturnType<
      typeof doc
    >;
    expect(served.resources[0].instances.map((i) => i.attributes.input.value)).toEqual([
      'x',
      'y',
      'z',
    ]);
    expect((await api('GET', `/v1/drift?state=${encodeURIComponent(name)}`)).body).toEqual({
      drift: [],
    });
  });

  it('lists the runs of a state, newest first', async () => {
    const list = await api('GET', `/v1/refresh-runs?state=${encodeURIComponent(name)}`);
    expect(list.status).toBe(200);
    expect(list.body.runs.map((r: { status: string }) => r.status)).toEqual([
      'failed',
      'failed',
      'succeeded',
      'succeeded',
    ]);
    expect(list.body.runs[3].run_id).toBe(runId);
    expectError(await api('GET', '/v1/refresh-runs?state=never-was'), 404, 'STATE.NOT_FOUND');
  });
});

describe('provider configs', () => {
  const state = unique('cfg');
  const AWS = 'registry.terraform.io/hashicorp/aws';
  const config = {
    region: 'eu-west-1',
    access_key: { env: 'AWS_ACCESS_KEY_ID' },
    assume_role: [{ role_arn: 'arn' }],
  };

  beforeAll(async () => {
    expect((await terraformPost(state, doc(1, ['a']))).status).toBe(200);
  });

  it('stores a config exactly as given, env references included, under the normalised source', async () => {
    const put = await api('PUT', '/v1/provider-configs', {
      state,
      source: 'hashicorp/aws',
      config,
    });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ source: AWS, config, updated_by: 'tester', replaced: null });
    await api('PUT', '/v1/provider-configs', {
      state,
      source: 'aws',
      alias: 'east',
      config: { region: 'us-east-1' },
    });
    const list = await api('GET', `/v1/provider-configs?state=${state}`);
    expect(list.body).toEqual({
      configs: [
        { source: AWS, alias: null, config, updated_at: expect.any(String), updated_by: 'tester' },
        {
          source: AWS,
          alias: 'east',
          config: { region: 'us-east-1' },
          updated_at: expect.any(String),
          updated_by: 'tester',
        },
      ],
    });
    const one = await api('GET', `/v1/provider-configs?state=${state}&source=${AWS}`);
    expect(one.body).toMatchObject({ source: AWS, alias: null, config });
    expect(
      (await api('GET', `/v1/provider-configs?state=${state}&source=hashicorp/aws&alias=east`))
        .body,
    ).toMatchObject({
      alias: 'east',
    });
  });

  it('deletes one config, and answers 404 for what is not stored', async () => {
    expect(
      (await api('DELETE', `/v1/provider-configs?state=${state}&source=hashicorp/aws&alias=east`))
        .status,
    ).toBe(200);
    expectError(
      await api('DELETE', `/v1/provider-configs?state=${state}&source=hashicorp/aws&alias=east`),
      404,
      'PROVIDER_CONFIG.NOT_FOUND',
    );
    expectError(
      await api('GET', `/v1/provider-configs?state=${state}&source=hashicorp/aws&alias=east`),
      404,
      'PROVIDER_CONFIG.NOT_FOUND',
    );
    expectError(
      await api('PUT', '/v1/provider-configs', { state, source: 'aws', config: 'x' }),
      400,
      'REQUEST.INVALID',
    );
    expectError(
      await api('PUT', '/v1/provider-configs', { state, source: 'a/b/c/d', config: {} }),
      400,
      'PROVIDER.INVALID_SOURCE',
    );
    expect((await api('GET', `/v1/provider-configs?state=${state}`)).body.configs).toHaveLength(1);
  });

  it('refuses a config for a state that does not exist, storing nothing', async () => {
    const missing = unique('no-such-state');
    expectError(
      await api('PUT', '/v1/provider-configs', { state: missing, source: 'aws', config: {} }),
      404,
      'STATE.NOT_FOUND',
    );
    expectError(
      await api('GET', `/v1/provider-configs/history?state=${missing}`),
      404,
      'STATE.NOT_FOUND',
    );
  });

  it('refuses an env reference that names no variable, saying where it is', async () => {
    const refused = await api('PUT', '/v1/provider-configs', {
      state,
      source: 'aws',
      config: { region: 'eu-west-1', access_key: { env: 5 } },
    });
    expectError(refused, 400, 'PROVIDER_CONFIG.INVALID');
    expect(refused.body.error.message).toBe(
      '{"env": …} at access_key must name an environment variable as a string, got 5',
    );
    expect(
      (await api('GET', `/v1/provider-configs?state=${state}&source=aws`)).body.config,
    ).toEqual(config);
  });

  it('checks keys against a provider schema kld has cached, unless told not to', async () => {
    const source = 'example/cfgcheck';
    const schemaOf = (attributes: string[]) => ({
      protocolVersion: 6,
      provider: {
        version: 0,
        block: {
          attributes: attributes.map((name) => ({ name, type: 'string', optional: true })),
          blockTypes: [
            {
              typeName: 'endpoints',
              nesting: 'list',
              block: { attributes: [{ name: 'api', type: 'string' }], blockTypes: [] },
            },
          ],
        },
      },
      resourceSchemas: {},
      dataSourceSchemas: {},
      serverCapabilities: {
        planDestroy: false,
        getProviderSchemaOptional: true,
        moveResourceState: false,
      },
    });
    const put = (config: unknown, extra: object = {}) =>
      api('PUT', '/v1/provider-configs', { state, source, config, ...extra });
    // No schema known yet: nothing to check against.
    expect((await put({ regoin: 'x' })).status).toBe(200);
    await api('PUT', '/v1/provider-schemas', {
      source,
      version: '1.0.0',
      schema: schemaOf(['region']),
    });
    await api('PUT', '/v1/provider-schemas', {
      source,
      version: '1.1.0',
      schema: schemaOf(['region', 'profile']),
    });

    const typo = await put({ regoin: 'x' });
    expectError(typo, 400, 'PROVIDER_CONFIG.INVALID');
    expect(typo.body.error.message).toMatch(
      /^provider registry\.terraform\.io\/example\/cfgcheck 1\.1\.0: provider config has no attribute "regoin" in the provider's schema \(nor in 1 older cached version\(s\)\); .*--no-schema-check/,
    );
    const nested = await put({ endpoints: [{ apii: 'x' }] });
    expectError(nested, 400, 'PROVIDER_CONFIG.INVALID');
    expect(nested.body.error.message).toContain(
      'provider config.endpoints[0] has no attribute "apii"',
    );
    // Known to one cached version is enough: the refresh may run that one.
    expect((await put({ region: 'x', profile: 'p', endpoints: [{ api: 'u' }] })).status).toBe(200);
    expect((await put({ regoin: 'y' }, { skip_schema_check: true })).status).toBe(200);
    expectError(await put({}, { skip_schema_check: 'yes' }), 400, 'REQUEST.INVALID');
  });

  it('keeps every change: who set or removed which config, and when', async () => {
    const before = (await api('GET', `/v1/provider-configs?state=${state}&source=aws`)).body;
    const replaced = await api('PUT', '/v1/provider-configs', {
      state,
      source: 'aws',
      config: { ...config, region: 'us-west-2' },
    });
    expect(replaced.body.replaced).toEqual({
      updated_at: before.updated_at,
      updated_by: 'tester',
    });
    const history = await api(
      'GET',
      `/v1/provider-configs/history?state=${state}&source=hashicorp/aws`,
    );
    expect(history.status).toBe(200);
    expect(history.body.history).toEqual([
      {
        at: expect.any(String),
        actor: 'tester',
        action: 'configured',
        source: AWS,
        alias: null,
        config,
        changed_paths: ['access_key', 'assume_role', 'region'],
      },
      {
        at: expect.any(String),
        actor: 'tester',
        action: 'configured',
        source: AWS,
        alias: null,
        config: { ...config, region: 'us-west-2' },
        changed_paths: ['region'],
      },
    ]);
    const all = await api('GET', `/v1/provider-configs/history?state=${state}`);
    expect(
      all.body.history.map((h: { action: string; alias: string | null; source: string }) => [
        h.action,
        h.source.split('/').pop(),
        h.alias,
      ]),
    ).toEqual([
      ['configured', 'aws', null],
      ['configured', 'aws', 'east'],
      ['removed', 'aws', 'east'],
      ['configured', 'cfgcheck', null],
      ['configured', 'cfgcheck', null],
      ['configured', 'cfgcheck', null],
      ['configured', 'aws', null],
    ]);
  });
});

describe('provider schemas', () => {
  const schema = {
    protocolVersion: 6,
    provider: { version: 0, block: { attributes: [], blockTypes: [] } },
    resourceSchemas: {
      kltest_thing: {
        version: 1,
        block: { attributes: [{ name: 'id', type: 'string', computed: true }], blockTypes: [] },
      },
    },
    dataSourceSchemas: {},
    serverCapabilities: {
      planDestroy: false,
      getProviderSchemaOptional: true,
      moveResourceState: false,
    },
  };

  it('answers 404 before a put, and the schema after it, under the normalised source', async () => {
    expectError(
      await api('GET', '/v1/provider-schemas?source=example/kltest&version=1.2.3'),
      404,
      'PROVIDER_SCHEMA.NOT_FOUND',
    );
    const put = await api('PUT', '/v1/provider-schemas', {
      source: 'example/kltest',
      version: '1.2.3',
      schema,
    });
    expect(put.status).toBe(200);
    const got = await api(
      'GET',
      '/v1/provider-schemas?source=registry.terraform.io/example/kltest&version=1.2.3',
    );
    expect(got).toEqual({ status: 200, body: { schema } });
    expectError(
      await api('GET', '/v1/provider-schemas?source=example/kltest'),
      400,
      'REQUEST.INVALID',
    );
  });

  it('keeps the first schema of a provider version: another is refused, the same one is accepted', async () => {
    const key = { source: 'example/kltest', version: '2.0.0' };
    expect((await api('PUT', '/v1/provider-schemas', { ...key, schema })).status).toBe(200);
    // What everyone's refresh decodes with: a user with write on one state cannot change it.
    const other = { ...schema, resourceSchemas: {} };
    const refused = await api('PUT', '/v1/provider-schemas', { ...key, schema: other });
    expectError(refused, 409, 'PROVIDER_SCHEMA.CONFLICT');
    expect(refused.body.error.message).toContain('registry.terraform.io/example/kltest 2.0.0');
    expect((await api('PUT', '/v1/provider-schemas', { ...key, schema })).status).toBe(200);
    const got = await api('GET', '/v1/provider-schemas?source=example/kltest&version=2.0.0');
    expect(got).toEqual({ status: 200, body: { schema } });
  });

  it('refuses a schema of a shape kl cannot decode with, and stores nothing', async () => {
    const key = { source: 'example/kltest', version: '3.0.0' };
    for (const [bad, why] of [
      [{ ...schema, protocolVersion: 7 }, 'protocolVersion must be 5 or 6'],
      [{ ...schema, provider: { block: {} } }, 'provider must hold a block'],
      [{ ...schema, resourceSchemas: { x: 'y' } }, 'resourceSchemas["x"] must hold a block'],
      [{ ...schema, dataSourceSchemas: [] }, 'dataSourceSchemas must be an object'],
    ] as const) {
      const res = await api('PUT', '/v1/provider-schemas', { ...key, schema: bad });
      expectError(res, 400, 'REQUEST.INVALID');
      expect(res.body.error.message).toContain(why);
    }
    expectError(
      await api('GET', '/v1/provider-schemas?source=example/kltest&version=3.0.0'),
      404,
      'PROVIDER_SCHEMA.NOT_FOUND',
    );
  });
});

describe('server-side refresh and the state-name rule', () => {
  const name = unique('srv');

  it('takes POST /v1/states/<name>/refresh as a refresh, not as a state named …/refresh', async () => {
    expectError(await api('POST', '/v1/states/no-such-state/refresh', {}), 404, 'STATE.NOT_FOUND');
    expectError(
      await api('POST', '/v1/state-lock/team/refresh', lockInfo('x')),
      400,
      'REQUEST.INVALID',
    );
    expectError(await api('GET', '/v1/states/team/Refresh'), 400, 'REQUEST.INVALID');
  });

  it('still takes a terraform POST to a name that merely contains "refresh"', async () => {
    for (const n of [`${name}/refresher`, `refresh/${name}`]) {
      expect((await terraformPost(n, doc(1, ['a']))).status).toBe(200);
      expect(await serialOf(n)).toBe(1);
    }
  });

  it('skips built-in resources: a state of terraform_data only succeeds and commits nothing', async () => {
    const builtIns = unique('srv-builtin');
    expect((await terraformPost(builtIns, doc(1, ['a', 'b', 'c']))).status).toBe(200);
    const r = await api('POST', `/v1/states/${builtIns}/refresh`, {});
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      status: 'succeeded',
      checked: 0,
      skipped: 3,
      failed: 0,
      to_version: null,
    });
    expect(await serialOf(builtIns)).toBe(1);
    expect((await api('GET', `/v1/refresh-runs/${r.body.run_id}`)).body).toMatchObject({
      status: 'succeeded',
      checked: 0,
      skipped: 3,
      to_version: null,
    });
  });

  it('runs the refresh on the server: without a provider every instance fails and nothing is committed', async () => {
    const missingProvider = {
      ...doc(1, ['a', 'b', 'c']),
      resources: doc(1, ['a', 'b', 'c']).resources.map((r) => ({
        ...r,
        type: 'missing_thing',
        provider: 'provider["registry.terraform.io/example/missing"]',
      })),
    };
    expect((await terraformPost(name, missingProvider)).status).toBe(200);
    const r = await api('POST', `/v1/states/${name}/refresh`, { dry_run: false });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      state: name,
      status: 'failed',
      checked: 3,
      failed: 3,
      to_version: null,
    });
    expect(await serialOf(name)).toBe(1);
    expect((await api('GET', `/v1/refresh-runs/${r.body.run_id}`)).body).toMatchObject({
      status: 'failed',
      failed: 3,
      actor: 'tester',
    });
    // The run's lock was released.
    expect((await api('LOCK', `/v1/states/${name}`, lockInfo('after'))).status).toBe(200);
  });
});

describe('server-side refresh with a real provider (kltest)', () => {
  const KLTEST = 'registry.terraform.io/kilolock/kltest';
  let root: string;
  let objects: string;
  let launchLog: string;
  let withProvider: KldProcess;
  let slow: KldProcess;
  /** Env values a provider's error repeats: a state_dir whose kltest_bucket is a file, and a file. */
  let unreadableDir: string;
  let notADir: string;

  /** A kltest_bucket as state stores it and as the provider's "cloud" holds it. */
  const bucket = (i: number, size: number, env: string) => ({
    id: `b${i}`,
    labels: { env },
    name: `bucket-${i}`,
    size,
  });

  function bucketsDoc(serial: number) {
    return {
      ...doc(serial, []),
      resources: [
        {
          mode: 'managed',
          type: 'kltest_bucket',
          name: 'b',
          provider: `provider["${KLTEST}"]`,
          instances: [0, 1, 2].map((i) => ({
            index_key: i,
            schema_version: 0,
            attributes: bucket(i, 10, 'dev'),
            sensitive_attributes: [],
          })),
        },
      ],
    };
  }

  async function withBuckets(server: KldProcess, stateDir = 'KLTEST_DIR'): Promise<string> {
    const name = unique('kltest');
    const put = (path: string, body: unknown) =>
      fetch(`${server.url}${path}`, {
        method: path.includes('states') ? 'POST' : 'PUT',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
      });
    expect((await put(`/v1/states/${name}`, bucketsDoc(1))).status).toBe(200);
    // The secret-free way: the directory comes from kld's environment.
    const config = {
      state: name,
      source: 'kilolock/kltest',
      config: { state_dir: { env: stateDir } },
    };
    expect((await put('/v1/provider-configs', config)).status).toBe(200);
    return name;
  }

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'kl-refresh-e2e-'));
    objects = join(root, 'objects');
    launchLog = join(root, 'launches.log');
    mkdirSync(join(objects, 'kltest_bucket'), { recursive: true });
    launchRecordingMirror({
      dir: join(root, 'mirror'),
      source: KLTEST,
      version: '0.1.0',
      binary: resolve(__dirname, '../support/provider/terraform-provider-kltest'),
      launchLog,
    });
    // The cloud: b0 as recorded, b1 resized, b2 relabelled.
    const cloud = [bucket(0, 10, 'dev'), bucket(1, 20, 'dev'), bucket(2, 10, 'prod')];
    for (const b of cloud) {
      writeFileSync(join(objects, 'kltest_bucket', `${b.id}.json`), JSON.stringify(b));
    }
    unreadableDir = join(root, `secret-${randomUUID()}`);
    mkdirSync(unreadableDir);
    writeFileSync(join(unreadableDir, 'kltest_bucket'), '');
    notADir = join(root, `secret-${randomUUID()}`);
    writeFileSync(notADir, '');
    const env = {
      KL_DATABASE_URL: t.url,
      KL_PROVIDER_PATH: join(root, 'mirror'),
      KLTEST_DIR: objects,
      KLTEST_DIR_UNREADABLE: unreadableDir,
      KLTEST_DIR_FILE: notADir,
      // Set on the server, but not among the names a refresh may read.
      KLTEST_OTHER: objects,
      KL_REFRESH_ENV_ALLOW: 'KLTEST_D*',
    };
    [withProvider, slow] = await Promise.all([
      startKld(env),
      startKld({ ...env, KLTEST_READ_DELAY_MS: '30000' }),
    ]);
  });

  afterAll(async () => {
    await Promise.all([withProvider?.stop(), slow?.stop()]);
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('refreshes through the provider, commits, and shows the drift', async () => {
    const name = await withBuckets(withProvider);
    const r = await fetch(`${withProvider.url}/v1/states/${name}/refresh`, { method: 'POST' });
    const report = (await r.json()) as Record<string, unknown>;
    expect(r.status).toBe(200);
    expect(report).toMatchObject({
      state: name,
      status: 'succeeded',
      dry_run: false,
      checked: 3,
      changed: 2,
      failed: 0,
      from_version: 1,
      to_version: 2,
    });
    expect(await serialOf(name)).toBe(2);
    const drift = (await api('GET', `/v1/drift?state=${name}`)).body.drift;
    expect(
      drift.map((d: { address: string; changed_paths: string[] }) => [d.address, d.changed_paths]),
    ).toEqual([
      ['kltest_bucket.b[1]', ['size']],
      ['kltest_bucket.b[2]', ['labels.env']],
    ]);
    // The run filled the shared schema cache.
    expect(
      (await api('GET', `/v1/provider-schemas?source=kilolock/kltest&version=0.1.0`)).status,
    ).toBe(200);
  });

  it('refuses an env reference the operator did not allow: 403 naming it, no provider started, nothing committed', async () => {
    const before = launches(launchLog);
    for (const [variable, why] of [
      ['KLTEST_OTHER', 'lists in KL_REFRESH_ENV_ALLOW'],
      ['KL_DATABASE_URL', "kld's own KL_* settings are never given to a provider"],
    ]) {
      const name = await withBuckets(withProvider, variable);
      const r = await api2(withProvider, 'POST', `/v1/states/${name}/refresh`);
      expect({ status: r.status, code: r.body.error?.code }).toEqual({
        status: 403,
        code: 'REFRESH.CONFIG_ENV_REFUSED',
      });
      expect(r.body.error.message).toContain(
        `provider ${KLTEST}: state_dir refers to environment variable ${variable}, which this server may not read`,
      );
      expect(r.body.error.message).toContain(why);
      expect(r.body.error.message).not.toContain(t.url);
      expect(await serialOf(name)).toBe(1);
      const runs = (await api('GET', `/v1/refresh-runs?state=${name}`)).body.runs;
      expect(runs).toEqual([
        expect.objectContaining({ status: 'failed', checked: 0, to_version: null }),
      ]);
      expect(runs[0].error_summary).toContain(variable);
    }
    expect(launches(launchLog)).toBe(before);
    // The same state with an allowed name refreshes, and the wrapper sees the launch.
    const allowed = await withBuckets(withProvider, 'KLTEST_DIR');
    const r = await api2(withProvider, 'POST', `/v1/states/${allowed}/refresh`);
    expect(r.body).toMatchObject({ status: 'succeeded', checked: 3, to_version: 2 });
    expect(launches(launchLog)).toBe(before + 1);
  });

  /** What the state's runs left for readers: their events, run rows and result rows. */
  async function storedRuns(name: string): Promise<string> {
    const rows = await t.db.query<{ text: string }>(
      `SELECT e.type || e.data::text || e.metadata::text AS text FROM kl_events e
         JOIN refresh_runs r ON e.stream_id = 'refresh-' || r.run_id WHERE r.state_name = $1
       UNION ALL SELECT row_to_json(r)::text FROM refresh_runs r WHERE r.state_name = $1
       UNION ALL SELECT row_to_json(x)::text FROM refresh_results x
         JOIN refresh_runs r USING (run_id) WHERE r.state_name = $1`,
      [name],
    );
    return rows.map((r) => r.text).join('\n');
  }

  it("keeps an env value a provider's error repeats out of the answer, the run's events and rows, and kld's log", async () => {
    for (const [variable, secret, says] of [
      [
        'KLTEST_DIR_UNREADABLE',
        unreadableDir,
        'Cannot read the remote object: ***/kltest_bucket/b0.json',
      ],
      ['KLTEST_DIR_FILE', notADir, 'Invalid state_dir: *** is a file, not a directory'],
    ]) {
      const name = await withBuckets(withProvider, variable);
      const r = await api2(withProvider, 'POST', `/v1/states/${name}/refresh`);
      expect(r.body).toMatchObject({ status: 'failed', failed: 3, to_version: null });
      // The provider's words are kept, the value is not.
      expect(r.body.failures[0].message).toContain(says);
      const stored = await storedRuns(name);
      expect(stored).toContain('ResourceRefreshed');
      expect(stored).toContain(says);
      const run = (await api2(withProvider, 'GET', `/v1/refresh-runs/${r.body.run_id}`)).body;
      for (const text of [
        JSON.stringify(r.body),
        JSON.stringify(run),
        stored,
        withProvider.output(),
      ]) {
        expect(text).not.toContain(secret);
      }
    }
  });

  it('cancels the run when the client hangs up, committing nothing and releasing the lock', async () => {
    const name = await withBuckets(slow);
    const hangUp = new AbortController();
    const request = fetch(`${slow.url}/v1/states/${name}/refresh`, {
      method: 'POST',
      signal: hangUp.signal,
    }).catch((e: unknown) => e);
    const running = async () =>
      (await api('GET', `/v1/refresh-runs?state=${name}`)).body.runs?.[0]?.status;
    for (let i = 0; i < 100 && (await running()) !== 'running'; i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
    await new Promise((r) => setTimeout(r, 500));
    hangUp.abort();
    expect(await request).toMatchObject({ name: 'AbortError' });
    let status: string | undefined;
    for (let i = 0; i < 100 && (status = await running()) === 'running'; i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(status).toBe('cancelled');
    expect(await serialOf(name)).toBe(1);
    // The run is recorded as cancelled just before its lock is released.
    let lock = 0;
    for (
      let i = 0;
      i < 50 &&
      (lock = (await api('LOCK', `/v1/states/${name}`, lockInfo('after'))).status) !== 200;
      i++
    ) {
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(lock).toBe(200);
  });
});
