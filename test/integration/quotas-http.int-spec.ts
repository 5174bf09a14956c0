import request from 'supertest';
import { startServer, KldServer } from '../../src/app/server';
import { loadConfig } from '../../src/infrastructure/config/config';
import { lockInfo, testDocument } from '../support/state-harness';
import { createTestDatabase, quietLogger, TestDatabase } from '../support/test-database';

/**
 * `/v1/quotas` with authentication on: only admin tokens change rules,
 * every refusal is one JSON error and stores nothing; the backend stores
 * commits over a quota and refuses apply locks on a state over it.
 */
describe('quotas over HTTP', () => {
  let t: TestDatabase;
  let server: KldServer;
  let admin: string;
  let teamA: string;
  let scraper: string;
  const http = () => server.app.getHttpServer();
  const eventCount = async () =>
    (await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM kl_events'))[0].n;
  const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });
  const postJson = (path: string, body: unknown, token = admin) =>
    request(http())
      .post(path)
      .set(bearer(token))
      .set('Content-Type', 'application/json')
      .send(JSON.stringify(body));
  const get = (path: string, token = admin) => request(http()).get(path).set(bearer(token));

  // n counted instances of one resource.
  const doc = (serial: number, n: number) =>
    testDocument(
      serial,
      Array.from({ length: n }, (_, key) => ({ name: 'r', key, input: 'x' })),
    );
  const lock = (state: string, id: string, operation: string) =>
    request(http())
      .lock(`/v1/states/${state}`)
      .set(bearer(admin))
      .set('Content-Type', 'application/json')
      .send(JSON.stringify(lockInfo(id, 'alice@laptop', operation)));

  beforeAll(async () => {
    t = await createTestDatabase();
    // Tokens made with authentication off, then the server that checks them.
    const open = await startServer(
      loadConfig({ KL_DATABASE_URL: t.url, KL_LISTEN: '127.0.0.1:0', KL_GRPC_LISTEN: 'off' }),
      quietLogger,
    );
    const create = async (name: string, scopes: string[]) => {
      const r = await request(open.app.getHttpServer())
        .post('/v1/admin/tokens')
        .set('Content-Type', 'application/json')
        .send(JSON.stringify({ name, scopes }))
        .expect(201);
      return r.body.token as string;
    };
    admin = await create('quota-admin', ['admin', 'write:*']);
    teamA = await create('team-a-ci', ['write:team-a/*']);
    scraper = await create('scraper', ['metrics']);
    await open.close();
    server = await startServer(
      loadConfig({
        KL_DATABASE_URL: t.url,
        KL_LISTEN: '127.0.0.1:0',
        KL_GRPC_LISTEN: 'off',
        KL_AUTH: 'on',
      }),
      quietLogger,
    );
    for (const state of ['team-a/app', 'team-b/app']) {
      await postJson(`/v1/states/${state}`, doc(1, 2)).expect(200);
    }
  });
  afterAll(async () => {
    await server?.close();
    await t?.drop();
  });

  it('refuses rule changes and the rule list to a token without admin (403), storing nothing', async () => {
    const before = await eventCount();
    let r = await postJson('/v1/quotas', { glob: 'team-a/*', max_resources: 100 }, teamA);
    expect(r.status).toBe(403);
    expect(r.body.error.code).toBe('AUTH.FORBIDDEN');
    r = await request(http()).delete('/v1/quotas?glob=team-a/*').set(bearer(teamA));
    expect(r.status).toBe(403);
    r = await get('/v1/quotas/rules', teamA);
    expect(r.status).toBe(403);
    expect(await eventCount()).toBe(before);
  });

  it('refuses malformed and out-of-range quotas with one error, storing nothing', async () => {
    const before = await eventCount();
    const cases: [unknown, string, string][] = [
      [
        { glob: 'x/*', max_resources: '3' },
        'REQUEST.INVALID',
        'max_resources must be a whole number',
      ],
      [
        { glob: 'x/*', max_resources: 3.5 },
        'REQUEST.INVALID',
        'max_resources must be a whole number',
      ],
      [
        { glob: 'x/*', max_resources: 3, colour: 'red' },
        'REQUEST.INVALID',
        'colour is not a known member',
      ],
      [{ max_resources: 3 }, 'REQUEST.INVALID', 'glob'],
      [
        { glob: 'x/*', max_resources: 0 },
        'QUOTA.INVALID',
        '--max-resources must be a whole number from 1',
      ],
      [{ glob: 'x/*', max_resources: 3, soft_resources: 3 }, 'QUOTA.INVALID', 'must be below'],
      [{ glob: 'x y', max_resources: 3 }, 'QUOTA.INVALID', 'is not a state-name glob'],
    ];
    for (const [body, code, message] of cases) {
      const r = await postJson('/v1/quotas', body);
      expect({ status: r.status, code: r.body.error?.code }).toEqual({ status: 400, code });
      expect(r.body.error.message).toContain(message);
    }
    const r = await request(http()).delete('/v1/quotas?glob=none/*').set(bearer(admin));
    expect(r.status).toBe(404);
    expect(r.body.error.code).toBe('QUOTA.NOT_FOUND');
    expect(await eventCount()).toBe(before);
    expect((await get('/v1/quotas/rules').expect(200)).body.quotas).toEqual([]);
  });

  it('sets a quota once (a repeat records nothing) and shows usage of readable states only', async () => {
    let r = await postJson('/v1/quotas', { glob: 'team-*', max_resources: 3, soft_resources: 2 });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ glob: 'team-*', max_resources: 3, soft_resources: 2, changed: true });
    const before = await eventCount();
    r = await postJson('/v1/quotas', { glob: 'team-*', max_resources: 3, soft_resources: 2 });
    expect(r.body.changed).toBe(false);
    expect(await eventCount()).toBe(before);

    r = await get('/v1/quotas', teamA).expect(200);
    expect(r.body.usage.map((u: { state: string }) => u.state)).toEqual(['team-a/app']);
    expect(r.body.usage[0]).toMatchObject({ resources: 2, headroom: 1, status: 'ok' });
    r = await get('/v1/quotas?state=team-b/app', teamA);
    expect(r.status).toBe(403);
    r = await get('/v1/quotas', admin).expect(200);
    expect(r.body.usage.map((u: { state: string }) => u.state)).toEqual([
      'team-a/app',
      'team-b/app',
    ]);
  });

  it('checks a projected count for a readable state', async () => {
    let r = await get('/v1/quotas/check?state=team-a/app&creates=2&deletes=0', teamA).expect(200);
    expect(r.body).toMatchObject({ current: 2, projected: 4, over: 'hard' });
    expect(r.body.message).toBe(
      'state team-a/app would hold 4 resources (now 2, +2), over the hard limit 3 of quota team-*',
    );
    r = await get('/v1/quotas/check?state=team-a/app&creates=1&deletes=1', teamA).expect(200);
    expect(r.body).toMatchObject({ projected: 2, over: null });
    r = await get('/v1/quotas/check?state=team-a/app&creates=-1&deletes=0', teamA);
    expect(r.status).toBe(400);
    expect(r.body.error.message).toContain('creates must be a non-negative integer');
    r = await get('/v1/quotas/check?state=team-b/app&creates=1&deletes=0', teamA);
    expect(r.status).toBe(403);
  });

  it('stores a commit over the hard limit, records it, and then refuses apply locks only', async () => {
    await postJson('/v1/states/team-b/app', doc(2, 5)).expect(200);
    const [overrun] = await t.db.query<{ type: string; data: Record<string, unknown> }>(
      `SELECT type, data FROM kl_events WHERE type = 'QuotaExceeded'`,
    );
    expect(overrun.data).toMatchObject({
      name: 'team-b/app',
      version: 2,
      level: 'hard',
      limit: 3,
      count: 5,
    });

    const before = await eventCount();
    const refused = await lock('team-b/app', 'apply-1', 'OperationTypeApply');
    expect(refused.status).toBe(423);
    expect(refused.body.ID).toContain('quota exceeded: state team-b/app holds 5 resources');
    expect(refused.body.Who).toBe('kilolock quota team-* (max 3 resources, state holds 5)');
    expect(await eventCount()).toBe(before);
    // Decided first on the rules this process holds, then on the rules read
    // again before refusing: one refused command for an operator to see.
    const scraped = (await get('/metrics', scraper).expect(200)).text;
    const refusals = scraped
      .split('\n')
      .filter(
        (l) =>
          l.startsWith('kilolock_command_duration_seconds_count{') &&
          l.includes('command="LockState"') &&
          l.includes('code="QUOTA.EXCEEDED"'),
      );
    expect(refusals).toHaveLength(1);
    expect(refusals[0]).toMatch(/outcome="refused".* 1$/);

    await lock('team-b/app', 'plan-1', 'OperationTypePlan').expect(200);
    await request(http())
      .unlock('/v1/states/team-b/app')
      .set(bearer(admin))
      .set('Content-Type', 'application/json')
      .send(JSON.stringify(lockInfo('plan-1', 'alice@laptop', 'OperationTypePlan')))
      .expect(200);

    // A kl apply run that writes is refused the same way; nothing is recorded.
    const beforeRun = await eventCount();
    const started = await postJson('/v1/api/states/team-b/app/apply-runs', {
      base_version: 2,
      write: ['terraform_data.r'],
      write_set: ['terraform_data.r[0]'],
    });
    expect(started.status).toBe(423);
    expect(started.body.error.code).toBe('QUOTA.EXCEEDED');
    expect(started.body.error.message).toContain('over the hard limit 3 of quota team-*');
    expect(await eventCount()).toBe(beforeRun);

    // The way out: an exact-name quota beats the team-wide one.
    await postJson('/v1/quotas', { glob: 'team-b/app', max_resources: 10 }).expect(200);
    await lock('team-b/app', 'apply-2', 'OperationTypeApply').expect(200);
    const usage = (await get('/v1/quotas?state=team-b/app').expect(200)).body.usage[0];
    expect(usage).toMatchObject({
      resources: 5,
      status: 'ok',
      quota: { glob: 'team-b/app', max_resources: 10 },
      last_overrun: { version: 2, level: 'hard', limit: 3, resources: 5 },
    });
  });
});
