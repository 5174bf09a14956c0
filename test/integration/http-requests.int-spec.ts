import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { startServer, KldServer } from '../../src/app/server';
import { loadConfig } from '../../src/infrastructure/config/config';
import { createTestDatabase, quietLogger, TestDatabase } from '../support/test-database';

/** Request bodies and query strings checked by their DTOs: what a refusal says, what is kept. */
describe('kld request validation', () => {
  let t: TestDatabase;
  let server: KldServer;
  const http = () => server.app.getHttpServer();
  const eventCount = async () =>
    (await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM kl_events'))[0].n;
  const json = (method: 'put' | 'post', path: string, body: string) =>
    request(http())[method](path).set('Content-Type', 'application/json').send(body);
  const refused = (r: request.Response) => {
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('REQUEST.INVALID');
    return r.body.error.message as string;
  };

  beforeAll(async () => {
    t = await createTestDatabase();
    server = await startServer(
      loadConfig({ KL_DATABASE_URL: t.url, KL_LISTEN: '127.0.0.1:0', KL_GRPC_LISTEN: 'off' }),
      quietLogger,
    );
    const doc = {
      version: 4,
      terraform_version: '1.11.4',
      serial: 1,
      lineage: 'l',
      outputs: {},
      resources: [],
    };
    await json('post', '/v1/states/team/app', JSON.stringify(doc)).expect(200);
  });
  afterAll(async () => {
    await server.close();
    await t.drop();
  });

  it('refuses a member no DTO declares, naming it, and stores nothing', async () => {
    const before = await eventCount();
    const message = refused(
      await json(
        'put',
        '/v1/provider-configs',
        JSON.stringify({ state: 'team/app', source: 'hashicorp/aws', config: {}, colour: 'red' }),
      ),
    );
    expect(message).toBe('colour is not a known member');
    expect(await eventCount()).toBe(before);
  });

  it('names a nested member by its path', async () => {
    const results = [
      { address: 'a.b', provider: 'p', outcome: 'unchanged', before_hash: 'h', after_hash: 'h' },
      { address: 'a.c', provider: 'p', outcome: 'sideways', before_hash: 'h', after_hash: null },
    ];
    const message = refused(
      await json('post', `/v1/refresh-runs/${randomUUID()}/results`, JSON.stringify({ results })),
    );
    expect(message).toMatch(/^results\[1\]\.outcome must be one of the following values: /);
    results[1] = { ...results[0], changed_paths: 'tags' } as never;
    expect(
      refused(
        await json('post', `/v1/refresh-runs/${randomUUID()}/results`, JSON.stringify({ results })),
      ),
    ).toBe('results[1].changed_paths must be an array');
  });

  it('refuses a body that is not an object, and a member of the wrong type', async () => {
    expect(refused(await json('post', '/v1/query', '[1, 2]'))).toBe('query must be a JSON object');
    expect(refused(await json('post', '/v1/query', '{"sql": "SELECT 1", "max_rows": "10"}'))).toBe(
      'max_rows must be an integer number',
    );
  });

  it('refuses a version number no version can have, saying so, wherever one is asked for', async () => {
    // Versions are PostgreSQL integers: a bigger number once reached the database and answered 500.
    const get = (path: string) => request(http()).get(path);
    const huge = '999999999999999';
    for (const path of [
      `/v1/api/states/team/app/resources?version=${huge}`,
      `/v1/api/states/team/app/resources/a.b?version=${huge}`,
      `/v1/api/states/team/app/diff?from_version=${huge}&to_version=1`,
      `/v1/api/states/team/app/diff?from_version=1&to_version=2147483648`,
    ]) {
      expect(refused(await get(path))).toMatch(
        /_?version must be an integer from 0 to 2147483647$/,
      );
    }
    expect(refused(await get(`/v1/states/team/app?version=${huge}`))).toBe(
      `version must be an integer from 0 to 2147483647, got "${huge}"`,
    );
    expect(
      refused(
        await json(
          'post',
          '/v1/engine/states/team/app/slice',
          JSON.stringify({ addresses: ['a.b'], version: 1e308 }),
        ),
      ),
    ).toBe('version must be an integer from 1 to 2147483647');
    // The largest there can be is looked up, and is not there.
    const max = await json(
      'post',
      '/v1/engine/states/team/app/slice',
      JSON.stringify({ addresses: ['a.b'], version: 2147483647 }),
    );
    expect({ status: max.status, code: max.body.error.code }).toEqual({
      status: 404,
      code: 'VERSION.NOT_FOUND',
    });
  });

  it('says which element of a list of addresses cannot be stored, and why', async () => {
    expect(
      refused(
        await json(
          'post',
          '/v1/engine/states/team/app/scope',
          JSON.stringify({ addresses: ['a.b', 'a.c', '\u0000'] }),
        ),
      ),
    ).toBe('addresses[2] holds a NUL character');
  });

  it('says what is wrong with a lease or a base version that is too big', async () => {
    const start = (body: object) =>
      json('post', '/v1/api/states/team/app/apply-runs', JSON.stringify(body));
    const lease = await start({ base_version: 1, write: ['a.b'], lease_seconds: 1e308 });
    expect({ status: lease.status, body: lease.body }).toEqual({
      status: 400,
      body: {
        error: { code: 'APPLY.INVALID', message: 'a lease must be 5 to 86400 seconds, got 1e+308' },
      },
    });
    expect(refused(await start({ base_version: 1e308, write: ['a.b'] }))).toBe(
      'base_version must be from 1 to 9007199254740991, got 1e+308',
    );
    expect(refused(await start({ base_version: 1, write: ['a.b'], lease_seconds: 1.5 }))).toBe(
      'lease_seconds must be an integer, got 1.5',
    );
  });

  it('checks query strings: integers, booleans, unknown and repeated parameters', async () => {
    const get = (path: string) => request(http()).get(path);
    expect(refused(await get('/v1/api/states/team/app/resources?version=1e3'))).toBe(
      'version must be an integer from 0 to 2147483647',
    );
    expect(refused(await get('/v1/api/states/team/app/resources?version=1&version=2'))).toBe(
      'version must be an integer from 0 to 2147483647',
    );
    expect(refused(await get('/v1/api/states/team/app/resources/a.b?history=yes'))).toBe(
      'history must be true or false',
    );
    expect(refused(await get('/v1/refresh-runs?limit=0'))).toBe(
      'limit must be an integer from 1 to 1000',
    );
    expect(refused(await get('/v1/drift?state=team/app&colour=red'))).toBe(
      'colour is not a known member',
    );
    // The access rule reads the state name before the DTO does.
    expect(refused(await get('/v1/drift?state=a//b'))).toMatch(/^invalid state name "a\/\/b"/);
    await get('/v1/api/states/team/app/resources?version=1').expect(200);
  });

  it('stores a provider config verbatim: keys named constructor, exact numbers', async () => {
    const config = {
      region: 'eu-west-1',
      default_tags: [{ tags: { constructor: 'team-a', prototype: 'p' } }],
      max_retries: 7,
    };
    const body = JSON.stringify({
      state: 'team/app',
      source: 'hashicorp/aws',
      config,
      skip_schema_check: true,
    }).replace('"max_retries":7', '"max_retries":12345678901234567890');
    await json('put', '/v1/provider-configs', body).expect(200);
    const got = await request(http())
      .get('/v1/provider-configs?state=team/app&source=hashicorp/aws')
      .expect(200);
    expect(got.body.config.default_tags).toEqual(config.default_tags);
    expect(got.text).toContain('"max_retries":12345678901234567890');
  });
});
