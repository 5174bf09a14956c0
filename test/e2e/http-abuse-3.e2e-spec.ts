import { bootstrapToken } from '../support/auth';
import { KldProcess, startKld } from '../support/kld-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { createToken, jsonCall, type JsonAnswer } from '../support/json-call';
import { oneResourceState } from '../../bench/support/one-resource-state';

/**
 * A hostile caller of kld's run and state-engine APIs with authentication
 * on: refresh results for instances the state does not have, a token of one
 * state reaching for another state's apply runs, a scope request repeating
 * one candidate many times. Each is refused with its reason (nothing
 * recorded) or answered as if sent once.
 */

jest.setTimeout(60_000);

let t: TestDatabase;
let kld: KldProcess;
let admin: string;
let teamWriter: string;
let otherWriter: string;

const call = (token: string, method: string, path: string, body?: unknown) =>
  jsonCall(kld.url, token, method, path, body);

const refusal = (a: JsonAnswer) => ({ status: a.status, code: a.body?.error?.code });

function doc(n: number, name = 'web') {
  return oneResourceState({ serial: 1, count: n, lineage: 'abuse-3', name });
}

const result = (address: string, outcome = 'drifted') => ({
  address,
  provider: 'provider["terraform.io/builtin/terraform"]',
  outcome,
  before_hash: 'b',
  after_hash: 'a',
  changed_paths: ['input'],
});

beforeAll(async () => {
  t = await createTestDatabase('kl_http_abuse3');
  admin = bootstrapToken(t.url, 'root', ['admin', 'write:*']).secret;
  kld = await startKld({ KL_DATABASE_URL: t.url, KL_AUTH: 'on' });
  const token = (name: string, scopes: string[]) => createToken(kld.url, admin, name, scopes);
  teamWriter = await token('team-writer', ['write:team/*']);
  otherWriter = await token('other-writer', ['write:other/*']);
  for (const name of ['team/a', 'other/b']) {
    expect((await call(admin, 'POST', `/v1/states/${name}`, doc(3))).status).toBe(200);
  }
});

afterAll(async () => {
  await kld?.stop();
  await t?.drop();
});

describe('refresh results', () => {
  it('refuses results for instances the refreshed version does not have, recording none of the batch', async () => {
    const started = await call(teamWriter, 'POST', '/v1/refresh-runs', { state: 'team/a' });
    expect(started.status).toBe(201);
    const run = `/v1/refresh-runs/${started.body.run_id}`;
    const refused = await call(teamWriter, 'POST', `${run}/results`, {
      results: [
        result('terraform_data.web[0]'),
        result('null_resource.ghost', 'failed'),
        // an instance of another state
        result('terraform_data.web[7]'),
      ],
    });
    expect(refusal(refused)).toEqual({ status: 400, code: 'REFRESH.INVALID' });
    expect(refused.body.error.message).toBe(
      'refresh results name 2 instance(s) version 1 of state team/a does not have: ' +
        '"null_resource.ghost", "terraform_data.web[7]"; nothing was recorded',
    );
    expect((await call(teamWriter, 'GET', run)).body).toMatchObject({
      status: 'running',
      checked: 0,
      changed: 0,
      failed: 0,
    });
    // The instances it has are taken, and the run can still succeed.
    expect(
      await call(teamWriter, 'POST', `${run}/results`, {
        results: [0, 1, 2].map((i) => result(`terraform_data.web[${i}]`, 'unchanged')),
      }),
    ).toEqual({ status: 200, body: { recorded: 3 } });
    const finished = await call(teamWriter, 'POST', `${run}/finish`, { status: 'succeeded' });
    expect(finished.body).toMatchObject({ status: 'succeeded', checked: 3, failed: 0 });
  });
});

describe('apply runs of another state', () => {
  it('lets no token of another state renew, finish or abort a run, by its state path or its id', async () => {
    const started = await call(teamWriter, 'POST', '/v1/api/states/team/a/apply-runs', {
      base_version: 1,
      write: ['terraform_data.web[0]'],
    });
    expect(started.status).toBe(201);
    const id = started.body.run_id as string;
    const own = `/v1/api/states/team/a/apply-runs/${id}`;
    const borrowed = `/v1/api/states/other/b/apply-runs/${id}`;
    expect(refusal(await call(otherWriter, 'POST', `${own}/heartbeat`, {}))).toEqual({
      status: 403,
      code: 'AUTH.FORBIDDEN',
    });
    expect(
      refusal(await call(otherWriter, 'POST', `${borrowed}/finish`, { status: 'failed' })),
    ).toEqual({ status: 404, code: 'APPLY.NOT_FOUND' });
    expect(refusal(await call(otherWriter, 'POST', `${borrowed}/abort`))).toEqual({
      status: 404,
      code: 'APPLY.NOT_FOUND',
    });
    // By its id alone: to a token that may not read its state, no such run.
    expect(refusal(await call(otherWriter, 'POST', `/v1/api/apply-runs/${id}/abort`))).toEqual({
      status: 404,
      code: 'APPLY.NOT_FOUND',
    });
    expect((await call(teamWriter, 'GET', own)).body).toMatchObject({ status: 'running' });
    // Any writer of the run's state may end it: the operator's escape hatch.
    const aborted = await call(admin, 'POST', `/v1/api/apply-runs/${id}/abort`);
    expect(aborted.body).toMatchObject({ state: 'team/a', status: 'aborted', released: 1 });
    expect((await call(teamWriter, 'GET', own)).body).toMatchObject({
      status: 'aborted',
      error_summary: 'aborted by root',
    });
  });
});

describe('state-engine scope', () => {
  it('answers a candidate sent 50,000 times as if sent once, and goes on serving', async () => {
    // Each copy once got its own list of every instance it covers: 50,000 lists of 1,000.
    expect((await call(admin, 'POST', '/v1/states/team/big', doc(1000, 'node'))).status).toBe(200);
    const scope = await call(teamWriter, 'POST', '/v1/engine/states/team/big/scope', {
      selectors: Array.from({ length: 50_000 }, () => ({ type: 'terraform_data' })),
      addresses: Array.from({ length: 50_000 }, () => 'terraform_data.node[7]'),
    });
    expect(scope.status).toBe(200);
    expect(scope.body.scope).toEqual([
      {
        address: 'terraform_data.node',
        instances: expect.any(Array),
        matched_by: ['terraform_data.node[7]', 'type=terraform_data'],
      },
    ]);
    expect(scope.body.scope[0].instances).toHaveLength(1000);
    expect(scope.body.unresolved).toEqual([]);
    expect((await fetch(`${kld.url}/healthz`)).status).toBe(200);
  });
});
