import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { KldProcess, startKld } from '../support/kld-process';
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

async function api(method: string, path: string, body?: unknown): Promise<Answer> {
  const r = await fetch(`${kld.url}${path}`, {
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

  it('stores a config exactly as given, env references included, under the normalised source', async () => {
    const put = await api('PUT', '/v1/provider-configs', {
      state,
      source: 'hashicorp/aws',
      config,
    });
    expect(put.status).toBe(200);
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

  it('runs the refresh on the server: without a provider every instance fails and nothing is committed', async () => {
    expect((await terraformPost(name, doc(1, ['a', 'b', 'c']))).status).toBe(200);
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
  let withProvider: KldProcess;
  let slow: KldProcess;

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

  async function withBuckets(server: KldProcess): Promise<string> {
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
      config: { state_dir: { env: 'KLTEST_DIR' } },
    };
    expect((await put('/v1/provider-configs', config)).status).toBe(200);
    return name;
  }

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'kl-refresh-e2e-'));
    objects = join(root, 'objects');
    const platform = join(root, 'mirror', KLTEST, '0.1.0', 'linux_amd64');
    mkdirSync(join(objects, 'kltest_bucket'), { recursive: true });
    mkdirSync(platform, { recursive: true });
    symlinkSync(
      resolve(__dirname, '../support/provider/terraform-provider-kltest'),
      join(platform, 'terraform-provider-kltest_v0.1.0'),
    );
    // The cloud: b0 as recorded, b1 resized, b2 relabelled.
    const cloud = [bucket(0, 10, 'dev'), bucket(1, 20, 'dev'), bucket(2, 10, 'prod')];
    for (const b of cloud) {
      writeFileSync(join(objects, 'kltest_bucket', `${b.id}.json`), JSON.stringify(b));
    }
    const env = {
      KL_DATABASE_URL: t.url,
      KL_PROVIDER_PATH: join(root, 'mirror'),
      KLTEST_DIR: objects,
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
