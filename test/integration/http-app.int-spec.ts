import request from 'supertest';
import { startServer, KldServer } from '../../src/app/server';
import { loadConfig } from '../../src/infrastructure/config/config';
import { createTestDatabase, quietLogger, TestDatabase } from '../support/test-database';

/** The Nest application in-process (no child process): routing, filters, read-your-writes. */
describe('kld HTTP application in-process', () => {
  let t: TestDatabase;
  let server: KldServer;
  beforeAll(async () => {
    t = await createTestDatabase();
    server = await startServer(
      loadConfig({ KL_DATABASE_URL: t.url, KL_LISTEN: '127.0.0.1:0', KL_GRPC_LISTEN: 'off' }),
      quietLogger,
    );
  });
  afterAll(async () => {
    await server.close();
    await t.drop();
  });

  it('is healthy and ready', async () => {
    await request(server.app.getHttpServer()).get('/healthz').expect(200, { status: 'ok' });
    await request(server.app.getHttpServer())
      .get('/readyz')
      .expect(200, {
        status: 'ready',
        checks: { database: true, migrations: true, projections: true, readModels: true },
      });
  });

  it('answers with the committed document right after the commit', async () => {
    const http = server.app.getHttpServer();
    for (let serial = 1; serial <= 5; serial++) {
      const doc = {
        version: 4,
        terraform_version: '1.11.4',
        serial,
        lineage: 'l-1',
        outputs: { serial: { value: serial, type: 'number' } },
        resources: [],
        check_results: null,
      };
      await request(http)
        .post('/v1/states/in-process')
        .set('Content-Type', 'application/json')
        .send(JSON.stringify(doc))
        .expect(200);
      const got = await request(http).get('/v1/states/in-process').expect(200);
      expect(JSON.parse(got.text).outputs.serial.value).toBe(serial);
      expect(got.headers['x-request-id']).toEqual(expect.any(String));
    }
  });

  it('gives a malformed document a JSON 400 and writes nothing', async () => {
    const http = server.app.getHttpServer();
    const before = await t.db.query('SELECT count(*)::int AS n FROM kl_events');
    const r = await request(http)
      .post('/v1/states/in-process')
      .set('Content-Type', 'application/json')
      .send('{"version": 4,')
      .expect(400);
    expect(r.body).toEqual({
      error: { code: 'STATE.INVALID', message: expect.stringMatching(/JSON/) },
    });
    expect(await t.db.query('SELECT count(*)::int AS n FROM kl_events')).toEqual(before);
  });
});
