import request from 'supertest';
import { startServer, KldServer } from '../../src/app/server';
import { loadConfig } from '../../src/infrastructure/config/config';
import { lockInfo, testDocument } from '../support/state-harness';
import { createTestDatabase, quietLogger, TestDatabase } from '../support/test-database';

/**
 * Two replicas on one database: a state's commits and locks on one are
 * judged by the quota rules the other has just changed, although the first
 * decides on the rules it last saw without reading their stream (the append
 * names their revision, and one made on rules that moved is decided again).
 */
describe('quotas across replicas', () => {
  let t: TestDatabase;
  const servers: KldServer[] = [];
  // n counted instances of one resource.
  const doc = (serial: number, n: number) =>
    testDocument(
      serial,
      Array.from({ length: n }, (_, key) => ({ name: 'r', key, input: 'x' })),
    );
  const post = (s: KldServer, path: string, body: unknown) =>
    request(s.app.getHttpServer())
      .post(path)
      .set('Content-Type', 'application/json')
      .send(JSON.stringify(body));
  const lock = (s: KldServer, id: string) =>
    request(s.app.getHttpServer())
      .lock('/v1/states/rep/app')
      .set('Content-Type', 'application/json')
      .send(JSON.stringify(lockInfo(id)));
  const unlock = (s: KldServer, id: string) =>
    request(s.app.getHttpServer())
      .unlock('/v1/states/rep/app')
      .set('Content-Type', 'application/json')
      .send(JSON.stringify({ ID: id }));

  beforeAll(async () => {
    t = await createTestDatabase();
    for (let i = 0; i < 2; i++) {
      servers.push(
        await startServer(
          loadConfig({ KL_DATABASE_URL: t.url, KL_LISTEN: '127.0.0.1:0', KL_GRPC_LISTEN: 'off' }),
          quietLogger,
        ),
      );
    }
  });
  afterAll(async () => {
    for (const s of servers) await s.close();
    await t?.drop();
  });

  it('judges commits and apply locks by rules another replica changed since', async () => {
    const [a, b] = servers;
    // Replica a has seen the rules (none) with its first commit and lock.
    await post(a, '/v1/states/rep/app', doc(1, 2)).expect(200);
    await lock(a, 'apply-0').expect(200);
    await unlock(a, 'apply-0').expect(200);

    await post(b, '/v1/quotas', { glob: 'rep/*', max_resources: 1 }).expect(200);
    await post(a, '/v1/states/rep/app', doc(2, 3)).expect(200);
    const overruns = await t.db.query<{ data: Record<string, unknown> }>(
      `SELECT data FROM kl_events WHERE type = 'QuotaExceeded'`,
    );
    expect(overruns.map((r) => r.data)).toEqual([
      expect.objectContaining({ name: 'rep/app', version: 2, level: 'hard', limit: 1, count: 3 }),
    ]);
    const refused = await lock(a, 'apply-1');
    expect(refused.status).toBe(423);
    expect(refused.body.ID).toContain('quota exceeded: state rep/app holds 3 resources');

    // Raised on b: a, which last saw the rule that refused, grants the lock.
    await post(b, '/v1/quotas', { glob: 'rep/app', max_resources: 10 }).expect(200);
    await lock(a, 'apply-2').expect(200);
  });
});
