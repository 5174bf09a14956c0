import request from 'supertest';
import { startServer, KldServer } from '../../src/app/server';
import { loadConfig } from '../../src/infrastructure/config/config';
import { createTestDatabase, quietLogger, TestDatabase } from '../support/test-database';

/**
 * A web page the developer visits must not be able to use their local kld
 * through the browser; terraform, curl and kl (no Origin header) must.
 * Headers are written the way terraform 1.11 and browsers send them.
 */
describe('cross-site requests to kld', () => {
  const EVIL = 'http://evil.example';
  const ALLOWED = 'https://kilolock.example.com';
  let t: TestDatabase;
  let server: KldServer;
  let own: string;

  beforeAll(async () => {
    t = await createTestDatabase();
    server = await startServer(
      loadConfig({
        KL_DATABASE_URL: t.url,
        KL_LISTEN: '127.0.0.1:0',
        KL_GRPC_LISTEN: 'off',
        KL_ALLOWED_ORIGINS: `${ALLOWED}, http://localhost:3000`,
      }),
      quietLogger,
    );
    own = server.url;
  });
  afterAll(async () => {
    await server.close();
    await t.drop();
  });

  const http = () => request(server.app.getHttpServer());

  const doc = (serial: number) =>
    JSON.stringify({
      version: 4,
      terraform_version: '1.11.4',
      serial,
      lineage: 'cross-site',
      outputs: {},
      resources: [],
      check_results: null,
    });
  const lockInfo = JSON.stringify({
    ID: 'lock-1',
    Operation: 'OperationTypeApply',
    Info: '',
    Who: 'mallory@evil',
    Version: '1.11.4',
    Created: new Date().toISOString(),
    Path: '',
  });

  async function events(): Promise<number> {
    const [row] = await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM kl_events');
    return row.n;
  }

  /** terraform 1.11's POST: Go's user agent, Content-Type application/json, Content-MD5, no Origin. */
  const terraformPost = (name: string, body: string) =>
    http()
      .post(`/v1/states/${name}`)
      .set('User-Agent', 'Go-http-client/1.1')
      .set('Content-Type', 'application/json')
      .send(body);

  it('refuses a page on another site writing, locking or deleting, and changes nothing', async () => {
    await terraformPost('victim', doc(1)).expect(200);
    const before = await events();

    const attempts = [
      http().post('/v1/states/victim').set('Content-Type', 'text/plain').send(doc(2)),
      http().post('/v1/states/new-one').set('Content-Type', 'text/plain').send(doc(1)),
      http().post('/v1/states/victim').set('Content-Type', 'application/json').send(doc(2)),
      http().lock('/v1/states/victim').set('Content-Type', 'text/plain').send(lockInfo),
      http().post('/v1/state-lock/victim').set('Content-Type', 'text/plain').send(lockInfo),
      http().delete('/v1/states/victim'),
      http().post('/v1/admin/projections/rebuild'),
      http().post('/v1/query').set('Content-Type', 'text/plain').send('{"sql":"SELECT 1"}'),
    ];
    for (const attempt of attempts) {
      const r = await attempt.set('Origin', EVIL);
      expect(r.status).toBe(403);
      expect(r.body).toEqual({
        error: {
          code: 'REQUEST.FORBIDDEN_ORIGIN',
          message: expect.stringContaining('origin "http://evil.example"'),
        },
      });
    }
    expect(await events()).toBe(before);
    expect(JSON.parse((await http().get('/v1/states/victim').expect(200)).text).serial).toBe(1);
    await http().get('/v1/states/new-one').expect(404);
    expect(await t.db.query('SELECT * FROM state_locks')).toEqual([]);
  });

  it('refuses an opaque origin ("null", sandboxed frames and file: pages)', async () => {
    const r = await http()
      .post('/v1/states/sandboxed')
      .set('Origin', 'null')
      .set('Content-Type', 'text/plain')
      .send(doc(1));
    expect(r.status).toBe(403);
    expect(r.body.error.code).toBe('REQUEST.FORBIDDEN_ORIGIN');
    await http().get('/v1/states/sandboxed').expect(404);
  });

  it('refuses a write the browser marks cross-site even without an Origin header', async () => {
    const r = await http()
      .post('/v1/states/fetch-site')
      .set('Sec-Fetch-Site', 'cross-site')
      .set('Content-Type', 'application/json')
      .send(doc(1));
    expect(r.status).toBe(403);
    expect(r.body.error).toEqual({
      code: 'REQUEST.FORBIDDEN_ORIGIN',
      message: expect.stringContaining('Sec-Fetch-Site: cross-site'),
    });
    await http().get('/v1/states/fetch-site').expect(404);
    // A page of kld's own is same-origin.
    await http()
      .post('/v1/states/fetch-site')
      .set('Sec-Fetch-Site', 'same-origin')
      .set('Origin', own)
      .set('Content-Type', 'application/json')
      .send(doc(1))
      .expect(200);
  });

  it("accepts kld's own origin, under each loopback name, on its own port only", async () => {
    const port = new URL(own).port;
    for (const origin of [own, `http://localhost:${port}`, `http://LOCALHOST:${port}`]) {
      await http()
        .post('/v1/states/own-origin')
        .set('Origin', origin)
        .set('Content-Type', 'application/json')
        .send(doc(1))
        .expect(200);
    }
    // Another port on the same host is another origin (another local web app).
    for (const origin of ['http://127.0.0.1:1', 'http://localhost', `https://localhost:${port}`]) {
      const r = await http()
        .post('/v1/states/own-origin')
        .set('Origin', origin)
        .set('Content-Type', 'application/json')
        .send(doc(2));
      expect([origin, r.status]).toEqual([origin, 403]);
    }
    expect(JSON.parse((await http().get('/v1/states/own-origin')).text).serial).toBe(1);
  });

  it('accepts origins listed in KL_ALLOWED_ORIGINS, as browsers write them', async () => {
    for (const origin of [ALLOWED, 'https://KiloLock.example.com:443', 'http://localhost:3000']) {
      await http()
        .post('/v1/states/allowed-origin')
        .set('Origin', origin)
        .set('Content-Type', 'application/json')
        .send(doc(1))
        .expect(200);
    }
  });

  it('serves terraform and curl (no Origin): POST, LOCK, UNLOCK, force-unlock and DELETE', async () => {
    await terraformPost('tf', doc(1)).expect(200);
    await http()
      .lock('/v1/states/tf')
      .set('Content-Type', 'application/json')
      .send(lockInfo)
      .expect(200);
    await terraformPost('tf', doc(2)).query({ ID: 'lock-1' }).expect(200);
    await http()
      .unlock('/v1/states/tf')
      .set('Content-Type', 'application/json')
      .send(lockInfo)
      .expect(200);
    // force-unlock: terraform sends an empty chunked body; kl an empty text/plain one.
    await http()
      .lock('/v1/states/tf')
      .set('Content-Type', 'application/json')
      .send(lockInfo)
      .expect(200);
    await http()
      .unlock('/v1/states/tf')
      .set('Content-Type', 'text/plain;charset=UTF-8')
      .send('')
      .expect(200);
    expect(await t.db.query('SELECT * FROM state_locks')).toEqual([]);
    await http().delete('/v1/states/tf').expect(200);
    await http().get('/v1/states/tf').expect(404);
    await http()
      .post('/v1/query')
      .set('Content-Type', 'application/json; charset=utf-8')
      .send('{"sql":"SELECT 1 AS one"}')
      .expect(200);
  });

  it('answers 415 to a body that is not JSON, and writes nothing', async () => {
    const before = await events();
    for (const [type, body] of [
      ['text/plain', doc(1)],
      ['application/x-www-form-urlencoded', doc(1)],
      ['multipart/form-data; boundary=x', doc(1)],
    ]) {
      const r = await http().post('/v1/states/plain').set('Content-Type', type).send(body);
      expect(r.status).toBe(415);
      expect(r.body).toEqual({
        error: {
          code: 'REQUEST.UNSUPPORTED_MEDIA_TYPE',
          message: expect.stringContaining('Content-Type: application/json'),
        },
      });
    }
    expect(await events()).toBe(before);
    await http().get('/v1/states/plain').expect(404);
  });

  it('answers only loopback names on a loopback address (DNS rebinding)', async () => {
    const port = new URL(own).port;
    // A page at evil.example whose name now resolves to 127.0.0.1 is same-origin
    // with "its" server: the browser sends its own name as Host and no Origin.
    const r = await http().get('/v1/api/states').set('Host', `evil.example:${port}`);
    expect(r.status).toBe(403);
    expect(r.body.error).toEqual({
      code: 'REQUEST.FORBIDDEN_HOST',
      message: expect.stringContaining('evil.example'),
    });
    for (const host of [
      `localhost:${port}`,
      `127.0.0.1:${port}`,
      `[::1]:${port}`,
      'app.localhost',
    ]) {
      await http().get('/v1/api/states').set('Host', host).expect(200);
    }
    // A proxy that keeps its public Host is fine once its origin is allowed.
    await http().get('/v1/api/states').set('Host', 'kilolock.example.com').expect(200);
  });
});
