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

  it('checks query strings: integers, booleans, unknown and repeated parameters', async () => {
    const get = (path: string) => request(http()).get(path);
    expect(refused(await get('/v1/api/states/team/app/resources?version=1e3'))).toBe(
      'version must be a non-negative integer',
    );
    expect(refused(await get('/v1/api/states/team/app/resources?version=1&version=2'))).toBe(
      'version must be a non-negative integer',
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
