import { createHash } from 'node:crypto';
import * as http from 'node:http';
import { startServer, KldServer } from '../../src/app/server';
import { loadConfig } from '../../src/infrastructure/config/config';
import { testDocument } from '../support/state-harness';
import { createTestDatabase, quietLogger, TestDatabase } from '../support/test-database';

/**
 * OpenTofu cannot be installed here, so these tests send what its `http`
 * backend sends, request for request. Facts about OpenTofu 1.7+ (from its
 * source, internal/backend/remote-state/http), stated here in our words:
 *
 * - Every request is made by Go's net/http (through go-retryablehttp):
 *   `User-Agent: Go-http-client/1.1`, `Accept-Encoding: gzip`, no Origin.
 * - The backend's `headers` map (1.7+) is set on every request; it may hold
 *   `Authorization` (e.g. `Bearer <token>`) when no `username` is set.
 * - A request with a body has `Content-Type: application/json` and
 *   `Content-MD5` (base64 MD5 of the body; Go writes the name `Content-Md5`).
 * - LOCK sends a LockInfo: ID, Operation, Info, Who, Version, Created
 *   (RFC 3339 with nanoseconds), Path; 200 means locked, 423 or 409 carry
 *   the holder's LockInfo, of which it prints the ID.
 * - The state is POSTed to the address with `?ID=<lock id>` while locked.
 * - UNLOCK after its own LOCK sends the same LockInfo. `tofu force-unlock
 *   <ID>` (1.10+) sends a LockInfo holding only that ID, every other member
 *   empty and Created the zero time; 1.7–1.9 send an empty body (still with
 *   Content-Type and the MD5 of nothing). Only 200 counts as unlocked.
 * - Workspaces: only `default`; any other is refused by OpenTofu itself
 *   before a request is sent, so nothing reaches kld.
 */
describe('what OpenTofu 1.7+ sends through its http backend', () => {
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

  const BEARER = { Authorization: 'Bearer kl_0123456789abcdef', 'X-Team': 'platform' };

  /** One request as Go's net/http writes it, with the backend's `headers`. */
  function tofu(
    method: string,
    path: string,
    body: string | null,
    headers: Record<string, string> = BEARER,
  ): Promise<{ status: number; body: string }> {
    const { port } = new URL(server.url);
    const h: Record<string, string> = {
      Host: `127.0.0.1:${port}`,
      'User-Agent': 'Go-http-client/1.1',
      'Accept-Encoding': 'gzip',
      ...headers,
    };
    if (body !== null) {
      h['Content-Type'] = 'application/json';
      h['Content-Md5'] = createHash('md5').update(body).digest('base64');
      h['Content-Length'] = String(Buffer.byteLength(body));
    } else if (method !== 'GET') {
      h['Content-Length'] = '0';
    }
    return new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, method, path, headers: h }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, body: text }));
      });
      req.on('error', reject);
      req.end(body ?? undefined);
    });
  }

  const lockInfo = (id: string, who = 'alice@laptop') =>
    JSON.stringify({
      ID: id,
      Operation: 'OperationTypeApply',
      Info: '',
      Who: who,
      Version: '1.10.6',
      Created: '2026-11-30T17:04:05.123456789Z',
      Path: '',
    });
  /** What `tofu force-unlock <id>` sends from 1.10 on: a zero LockInfo with that ID. */
  const forceUnlockBody = (id: string) =>
    JSON.stringify({
      ID: id,
      Operation: '',
      Info: '',
      Who: '',
      Version: '',
      Created: '0001-01-01T00:00:00Z',
      Path: '',
    });
  const state = (serial: number) =>
    JSON.stringify(testDocument(serial, [{ name: 'a', input: `v${serial}` }]));
  const holder = async (name: string) =>
    (
      await t.db.query<{ lock_id: string }>(
        `SELECT l.lock_id FROM state_locks l JOIN states s USING (state_id) WHERE s.name = $1`,
        [name],
      )
    ).map((r) => r.lock_id);

  it('runs an apply: GET, LOCK, GET, POST ?ID=, UNLOCK, with a Bearer header on each', async () => {
    const path = '/v1/states/tofu/apply';
    expect((await tofu('GET', path, null)).status).toBe(404); // no state yet
    expect(await tofu('LOCK', path, lockInfo('1b7c0f5e-8a4d-4e2f-9c3b-5d6e7f809a1b'))).toEqual({
      status: 200,
      body: '',
    });
    expect((await tofu('GET', path, null)).status).toBe(404);
    const doc = state(1);
    const posted = await tofu('POST', `${path}?ID=1b7c0f5e-8a4d-4e2f-9c3b-5d6e7f809a1b`, doc);
    expect(posted.status).toBe(200);
    expect(
      (await tofu('UNLOCK', path, lockInfo('1b7c0f5e-8a4d-4e2f-9c3b-5d6e7f809a1b'))).status,
    ).toBe(200);
    const got = await tofu('GET', path, null);
    expect(got.status).toBe(200);
    expect(JSON.parse(got.body)).toEqual(JSON.parse(doc));
    expect(await holder('tofu/apply')).toEqual([]);
  });

  it('answers a second LOCK with 423 and the holder’s LockInfo, whose ID OpenTofu prints', async () => {
    const path = '/v1/states/tofu/conflict';
    expect((await tofu('LOCK', path, lockInfo('first'))).status).toBe(200);
    const second = await tofu('LOCK', path, lockInfo('second', 'bob@ci'));
    expect(second.status).toBe(423);
    expect(JSON.parse(second.body)).toMatchObject({ ID: 'first', Who: 'alice@laptop' });
  });

  it('force-unlock (1.10+): the ID it sends releases that lock', async () => {
    const path = '/v1/states/tofu/force';
    expect((await tofu('LOCK', path, lockInfo('stuck-lock'))).status).toBe(200);
    expect((await tofu('UNLOCK', path, forceUnlockBody('stuck-lock'))).status).toBe(200);
    expect(await holder('tofu/force')).toEqual([]);
    // and the state can be locked again
    expect((await tofu('LOCK', path, lockInfo('next'))).status).toBe(200);
  });

  it('force-unlock (1.10+) with another lock’s ID releases nothing', async () => {
    const path = '/v1/states/tofu/mistyped';
    expect((await tofu('LOCK', path, lockInfo('the-real-one'))).status).toBe(200);
    const r = await tofu('UNLOCK', path, forceUnlockBody('a-typo'));
    expect(r.status).toBe(409); // OpenTofu: "Unexpected HTTP response code 409"
    expect(JSON.parse(r.body)).toMatchObject({ ID: 'the-real-one' });
    expect(await holder('tofu/mistyped')).toEqual(['the-real-one']);
  });

  it('accepts an UNLOCK body that holds only the ID', async () => {
    const path = '/v1/states/tofu/only-id';
    expect((await tofu('LOCK', path, lockInfo('only-id'))).status).toBe(200);
    expect((await tofu('UNLOCK', path, JSON.stringify({ ID: 'only-id' }))).status).toBe(200);
    expect(await holder('tofu/only-id')).toEqual([]);
  });

  it('force-unlock (1.7–1.9): an empty body releases whoever holds the lock, as terraform’s', async () => {
    const path = '/v1/states/tofu/old-force';
    expect((await tofu('LOCK', path, lockInfo('held'))).status).toBe(200);
    expect((await tofu('UNLOCK', path, '')).status).toBe(200);
    expect(await holder('tofu/old-force')).toEqual([]);
  });

  it('takes the same requests with basic auth instead of headers', async () => {
    const basic = { Authorization: `Basic ${Buffer.from('alice:pw').toString('base64')}` };
    const path = '/v1/states/tofu/basic';
    expect((await tofu('LOCK', path, lockInfo('b-lock'), basic)).status).toBe(200);
    expect((await tofu('POST', `${path}?ID=b-lock`, state(1), basic)).status).toBe(200);
    expect((await tofu('UNLOCK', path, lockInfo('b-lock'), basic)).status).toBe(200);
    const [row] = await t.db.query<{ actor: string }>(
      `SELECT metadata->>'actor' AS actor FROM kl_events
        WHERE stream_id = 'state-tofu/basic' AND type = 'ApplyCommitted'`,
    );
    expect(row.actor).toBe('alice');
  });
});
