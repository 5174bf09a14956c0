import request from 'supertest';
import { startServer, KldServer } from '../../src/app/server';
import { loadConfig } from '../../src/infrastructure/config/config';
import { TcpProxy } from '../support/tcp-proxy';
import { createTestDatabase, quietLogger, TestDatabase } from '../support/test-database';

const doc = (serial: number) =>
  JSON.stringify({
    version: 4,
    terraform_version: '1.11.4',
    serial,
    lineage: 'outage',
    outputs: {},
    resources: [],
    check_results: null,
  });

/** 503 SERVER.UNAVAILABLE with Retry-After, naming neither the database's URL nor its host. */
function expectUnavailable(r: request.Response): void {
  expect([r.status, r.body.error?.code, r.headers['retry-after']]).toEqual([
    503,
    'SERVER.UNAVAILABLE',
    '1',
  ]);
  expect(r.body.error.message).not.toMatch(/postgres:|password|127\.0\.0\.1/);
}

/** kld whose database goes away while it serves, then comes back. */
describe('kld when the database cannot be reached', () => {
  let t: TestDatabase;
  let proxy: TcpProxy;
  let server: KldServer;
  beforeAll(async () => {
    t = await createTestDatabase();
    const target = new URL(t.url);
    proxy = await new TcpProxy({ host: target.hostname, port: Number(target.port) }).start();
    // libpq's connect_timeout, which kld honours: a hung server costs a caller 1 s here
    const url = new URL(proxy.via(t.url));
    url.searchParams.set('connect_timeout', '1');
    server = await startServer(
      loadConfig({
        KL_DATABASE_URL: url.toString(),
        KL_LISTEN: '127.0.0.1:0',
        KL_GRPC_LISTEN: 'off',
      }),
      quietLogger,
    );
  });
  afterAll(async () => {
    await proxy.restore();
    await server.close();
    await proxy.cut();
    await t.drop();
  });

  it('answers 503 SERVER.UNAVAILABLE with Retry-After, and serves again once it is back', async () => {
    const http = server.app.getHttpServer();
    await request(http).post('/v1/states/outage').type('json').send(doc(1)).expect(200);

    await proxy.cut();
    for (const call of [
      () => request(http).get('/v1/states/outage-other'),
      () => request(http).post('/v1/states/outage').type('json').send(doc(2)),
      () => request(http).get('/v1/api/states'),
      () => request(http).post('/v1/state-lock/outage').type('json').send('{"ID":"away"}'),
    ]) {
      expectUnavailable(await call());
    }

    await proxy.restore();
    // nothing of what was refused was written: serial 1, and no lock held
    const before = await request(http).get('/v1/states/outage').expect(200);
    expect(JSON.parse(before.text).serial).toBe(1);
    await request(http)
      .post('/v1/state-lock/outage')
      .type('json')
      .send('{"ID":"back"}')
      .expect(200);
    await request(http)
      .post('/v1/state-unlock/outage')
      .type('json')
      .send('{"ID":"back"}')
      .expect(200);
    await request(http).post('/v1/states/outage').type('json').send(doc(2)).expect(200);
    const got = await request(http).get('/v1/states/outage').expect(200);
    expect(JSON.parse(got.text).serial).toBe(2);
  });

  it('answers 503 within the connect timeout when the database accepts and never answers', async () => {
    const http = server.app.getHttpServer();
    await request(http).post('/v1/states/hung').type('json').send(doc(1)).expect(200);

    await proxy.stall();
    for (const call of [
      () => request(http).get('/v1/states/hung-other'),
      () => request(http).post('/v1/state-lock/hung').type('json').send('{"ID":"away"}'),
    ]) {
      expectUnavailable(await call());
    }

    await proxy.restore();
    await request(http).post('/v1/state-lock/hung').type('json').send('{"ID":"back"}').expect(200);
    await request(http)
      .post('/v1/state-unlock/hung')
      .type('json')
      .send('{"ID":"back"}')
      .expect(200);
  });
});
