import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { bootstrapToken, dumpAllRows } from '../support/auth';
import { KLD, KldProcess, startKld } from '../support/kld-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/**
 * Authentication on (KL_AUTH=on, loopback): bootstrap with `kld token
 * create`, tokens over REST, scopes on every route, identity on events,
 * hashed storage, and revocation seen at once by a second replica.
 */

jest.setTimeout(180_000);

let t: TestDatabase;
let a: KldProcess;
let b: KldProcess;
let admin: string;
// Run before the servers start: kld token create takes seconds, and fetch's
// kept-alive connections to an idle server may be closed under it.
let again: ReturnType<typeof bootstrapToken>;
let bad: ReturnType<typeof bootstrapToken>;
let logged: ReturnType<typeof bootstrapToken>;

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json: () => any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

async function call(
  kld: KldProcess,
  method: string,
  path: string,
  options: {
    token?: string;
    basic?: [string, string];
    body?: unknown;
    headers?: Record<string, string>;
  } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token !== undefined) headers.Authorization = `Bearer ${options.token}`;
  if (options.basic) {
    headers.Authorization = `Basic ${Buffer.from(options.basic.join(':')).toString('base64')}`;
  }
  let body: string | undefined;
  if (options.body !== undefined) {
    body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
    headers['Content-Type'] = 'application/json';
  }
  const r = await fetch(`${kld.url}${path}`, { method, headers, body });
  const text = await r.text();
  return { status: r.status, headers: r.headers, text, json: () => JSON.parse(text) };
}

function doc(serial: number, lineage: string): Record<string, unknown> {
  return {
    version: 4,
    terraform_version: '1.11.4',
    serial,
    lineage,
    outputs: {},
    resources: [
      {
        mode: 'managed',
        type: 'terraform_data',
        name: 'r',
        provider: 'provider["terraform.io/builtin/terraform"]',
        instances: [
          {
            schema_version: 0,
            attributes: { id: 'x', input: null, output: null, triggers_replace: null },
            sensitive_attributes: [],
          },
        ],
      },
    ],
    check_results: null,
  };
}

const lockInfo = (id: string) => ({
  ID: id,
  Operation: 'OperationTypeApply',
  Info: '',
  Who: 'someone@host',
  Version: '1.11.4',
  Created: '2026-11-30T00:00:00Z',
  Path: '',
});

async function createToken(scopes: string[], name = `t-${randomUUID().slice(0, 8)}`) {
  const r = await call(a, 'POST', '/v1/admin/tokens', { token: admin, body: { name, scopes } });
  expect(r.status).toBe(201);
  return { name, secret: r.json().token as string };
}

beforeAll(async () => {
  t = await createTestDatabase('kl_auth');
  const boot = bootstrapToken(t.url, 'root', ['admin', 'write:*', 'query']);
  expect(boot).toMatchObject({ code: 0 });
  admin = boot.secret;
  again = bootstrapToken(t.url, 'root', ['admin']);
  bad = bootstrapToken(t.url, 'other', ['superuser']);
  logged = bootstrapToken(t.url, 'logged', ['query'], [], {
    KL_LOG_LEVEL: 'debug',
    KL_LOG_FORMAT: 'json',
  });
  [a, b] = await Promise.all([
    startKld({ KL_DATABASE_URL: t.url, KL_AUTH: 'on' }),
    startKld({ KL_DATABASE_URL: t.url, KL_AUTH: 'on' }),
  ]);
});

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  await t?.drop();
});

describe('bootstrap', () => {
  it('kld token create prints only the secret on stdout: kl_ and 256 bits', () => {
    expect(admin).toMatch(/^kl_[A-Za-z0-9_-]{43}$/);
  });

  it('logs to stderr, so `TOKEN=$(kld token create …)` holds the secret alone at any log level', () => {
    expect(logged.code).toBe(0);
    expect(logged.stdout).toMatch(/^kl_[A-Za-z0-9_-]{43}\n$/);
    // it did log, as JSON lines on stderr
    expect(logged.stderr).toMatch(/^\{"level":20,.*"msg":"Starting Nest application..."\}$/m);
  });

  it('refuses a second token of the same name, and a bad scope, with one line and exit 2', () => {
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/^kld: a token named "root" exists/);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('"superuser" is not a scope');
  });
});

describe('authentication', () => {
  it('answers 401 with a Basic challenge without a token, or with a wrong one', async () => {
    for (const options of [
      {},
      { token: 'kl_nope' },
      { basic: ['u', 'kl_nope'] as [string, string] },
    ]) {
      const r = await call(a, 'GET', '/v1/api/states', options);
      expect(r.status).toBe(401);
      expect(r.headers.get('www-authenticate')).toMatch(/^Basic realm="kilolock"/);
      expect(r.json().error.code).toBe('AUTH.UNAUTHENTICATED');
      expect(r.text).not.toContain('kl_nope');
    }
  });

  it('takes the token as the basic-auth password or as a Bearer token', async () => {
    expect((await call(a, 'GET', '/v1/api/states', { token: admin })).status).toBe(200);
    expect((await call(a, 'GET', '/v1/api/states', { basic: ['alice', admin] })).status).toBe(200);
  });

  it('leaves health, readiness and version open', async () => {
    for (const path of ['/healthz', '/readyz', '/v1/version']) {
      expect((await call(a, 'GET', path)).status).toBe(200);
    }
  });
});

describe('operations routes', () => {
  it('leaves the API description open: it holds no data', async () => {
    const doc = await call(a, 'GET', '/openapi.json');
    expect(doc.status).toBe(200);
    expect(doc.json().paths).toHaveProperty(['/v1/admin/tokens']);
    const page = await call(a, 'GET', '/docs');
    expect([page.status, page.headers.get('content-type')]).toEqual([
      200,
      expect.stringMatching(/^text\/html/),
    ]);
  });

  it('serves /metrics to a token with the metrics scope only, never showing a secret', async () => {
    const scraper = await createToken(['metrics']);
    const reader = await createToken(['read:*']);
    expect((await call(a, 'GET', '/metrics')).status).toBe(401);
    const refused = await call(a, 'GET', '/metrics', { token: reader.secret });
    expect(refused.status).toBe(403);
    expect(refused.json().error.message).toContain('needs the metrics scope');
    // admin does not imply it: a scraper's token is its own
    expect((await call(a, 'GET', '/metrics', { token: admin })).status).toBe(403);
    // a request naming a state and a token, then the scrape
    await call(a, 'GET', '/v1/states/secret-team/x', { basic: ['alice', reader.secret] });
    const scraped = await call(a, 'GET', '/metrics', { token: scraper.secret });
    expect(scraped.status).toBe(200);
    expect(scraped.text).toContain('kilolock_http_request_duration_seconds');
    for (const secret of [admin, reader.secret, scraper.secret, 'secret-team', 'alice']) {
      expect(scraped.text).not.toContain(secret);
    }
    // the scraper may do nothing else
    expect((await call(a, 'GET', '/v1/api/states', { token: scraper.secret })).status).toBe(403);
  });
});

describe('identity', () => {
  it("is the token's name (and basic username); the actor header only adds on-behalf-of", async () => {
    const ci = await createToken(['write:id/*']);
    const state = `id/${randomUUID().slice(0, 8)}`;
    const lineage = randomUUID();
    expect(
      (
        await call(a, 'POST', `/v1/states/${state}`, {
          basic: ['alice', ci.secret],
          body: doc(1, lineage),
        })
      ).status,
    ).toBe(200);
    expect(
      (
        await call(a, 'POST', `/v1/states/${state}`, {
          token: ci.secret,
          body: doc(2, lineage),
          headers: { 'X-Kilolock-Actor': 'root' },
        })
      ).status,
    ).toBe(200);
    const history = (
      await call(a, 'GET', `/v1/api/states/${state}/history`, { token: admin })
    ).json();
    expect(history.versions.map((v: { actor: string }) => v.actor)).toEqual([
      `${ci.name} (alice)`,
      `${ci.name} on behalf of root`,
    ]);
  });
});

describe('scopes', () => {
  const other = `team-b/${randomUUID().slice(0, 8)}`;
  let teamA: { name: string; secret: string };
  let runId: string;

  beforeAll(async () => {
    const lineage = randomUUID();
    expect(
      (await call(a, 'POST', `/v1/states/${other}`, { token: admin, body: doc(1, lineage) }))
        .status,
    ).toBe(200);
    const run = await call(a, 'POST', '/v1/refresh-runs', {
      token: admin,
      body: { state: other, dry_run: true },
    });
    expect(run.status).toBe(201);
    runId = run.json().run_id;
    teamA = await createToken(['write:team-a/*', 'read:shared/*']);
  });

  it("a team-a/* token gets 403 on another team's state on every route", async () => {
    const routes: [string, string, unknown?][] = [
      ['GET', `/v1/states/${other}`],
      ['POST', `/v1/states/${other}`, doc(2, randomUUID())],
      ['DELETE', `/v1/states/${other}`],
      ['LOCK', `/v1/states/${other}`, lockInfo(randomUUID())],
      ['UNLOCK', `/v1/states/${other}`, lockInfo(randomUUID())],
      ['POST', `/v1/state-lock/${other}`, lockInfo(randomUUID())],
      ['POST', `/v1/state-unlock/${other}`, lockInfo(randomUUID())],
      ['POST', `/v1/states/${other}/refresh`, {}],
      ['GET', `/v1/api/states/${other}/history`],
      ['GET', `/v1/api/states/${other}/resources`],
      ['GET', `/v1/api/states/${other}/resources/terraform_data.r`],
      ['GET', `/v1/api/states/${other}/diff?from=1`],
      ['POST', `/v1/api/states/${other}/import`, doc(3, randomUUID())],
      ['POST', `/v1/api/states/${other}/force-unlock`, {}],
      ['GET', `/v1/drift?state=${other}`],
      ['GET', `/v1/provider-configs?state=${other}`],
      ['GET', `/v1/provider-configs/history?state=${other}`],
      ['PUT', '/v1/provider-configs', { state: other, source: 'hashicorp/aws', config: {} }],
      ['DELETE', `/v1/provider-configs?state=${other}&source=hashicorp/aws`],
      ['POST', '/v1/refresh-runs', { state: other, dry_run: true }],
      ['GET', `/v1/refresh-runs?state=${other}`],
      ['POST', `/v1/api/states/${other}/apply-runs`, {}],
      ['GET', `/v1/api/states/${other}/reservations`],
      ['GET', `/v1/api/states/${other}/apply-runs/${runId}`],
      ['GET', `/v1/api/states/${other}/apply-runs/${runId}/output-state`],
      ['POST', `/v1/api/states/${other}/apply-runs/${runId}/heartbeat`, {}],
      ['POST', `/v1/api/states/${other}/apply-runs/${runId}/commit`, {}],
      ['POST', `/v1/api/states/${other}/apply-runs/${runId}/finish`, {}],
      ['POST', `/v1/api/states/${other}/apply-runs/${runId}/abort`, {}],
      ['GET', `/v1/dashboard/changes?state=${other}`],
      ['GET', `/v1/dashboard/resources?state=${other}`],
      ['GET', `/v1/dashboard/dependencies?state=${other}&address=terraform_data.r`],
      ['GET', `/v1/engine/states/${other}`],
      ['POST', `/v1/engine/states/${other}/scope`, { candidates: [] }],
      ['POST', `/v1/engine/states/${other}/slice`, { addresses: [] }],
      ['POST', `/v1/engine/states/${other}/runs`, {}],
      ['POST', `/v1/engine/states/${other}/runs/${runId}/commit`, {}],
      ['POST', `/v1/engine/states/${other}/runs/${runId}/finish`, {}],
      ['POST', '/v1/query', { sql: 'SELECT 1' }],
      ['POST', '/v1/admin/projections/rebuild'],
      ['POST', '/v1/admin/projections/skip', { projector: 'x', position: 1, reason: 'r' }],
      ['GET', '/v1/admin/tokens'],
      ['POST', '/v1/admin/tokens', { name: 'sneaky', scopes: ['admin'] }],
      ['DELETE', `/v1/admin/tokens/root`],
    ];
    for (const [method, path, body] of routes) {
      const r = await call(a, method, path, { token: teamA.secret, body });
      expect({ route: `${method} ${path}`, status: r.status, code: r.json().error?.code }).toEqual({
        route: `${method} ${path}`,
        status: 403,
        code: 'AUTH.FORBIDDEN',
      });
    }
    // A run asked for by its id alone is, to a token that may not read its state, no run:
    // the id tells it neither the state nor that the run exists.
    const byId: [string, string, unknown?][] = [
      ['GET', `/v1/refresh-runs/${runId}`],
      ['POST', `/v1/refresh-runs/${runId}/results`, { results: [] }],
      ['POST', `/v1/refresh-runs/${runId}/finish`, { status: 'failed' }],
    ];
    for (const [method, path, body] of byId) {
      const r = await call(a, method, path, { token: teamA.secret, body });
      expect({ route: `${method} ${path}`, status: r.status, error: r.json().error }).toEqual({
        route: `${method} ${path}`,
        status: 404,
        error: { code: 'REFRESH.NOT_FOUND', message: `refresh run ${runId} does not exist` },
      });
    }
    // Nothing changed: the state is still at version 1 and unlocked.
    const history = (
      await call(a, 'GET', `/v1/api/states/${other}/history`, { token: admin })
    ).json();
    expect(history.versions).toHaveLength(1);
  });

  it('lists only the states, locks and runs the token may read', async () => {
    const own = `team-a/${randomUUID().slice(0, 8)}`;
    expect(
      (
        await call(a, 'POST', `/v1/states/${own}`, {
          token: teamA.secret,
          body: doc(1, randomUUID()),
        })
      ).status,
    ).toBe(200);
    const names = (await call(a, 'GET', '/v1/api/states', { token: teamA.secret }))
      .json()
      .states.map((s: { name: string }) => s.name);
    expect(names).toContain(own);
    expect(names.every((n: string) => n.startsWith('team-a/') || n.startsWith('shared/'))).toBe(
      true,
    );
    const all = (await call(a, 'GET', '/v1/api/states', { token: admin })).json();
    expect(all.states.map((s: { name: string }) => s.name)).toContain(other);
    const runs = (await call(a, 'GET', '/v1/refresh-runs', { token: teamA.secret })).json().runs;
    expect(runs.some((r: { run_id: string }) => r.run_id === runId)).toBe(false);
    // A terraform lock on team-b is a reservation the team-a token does not see.
    expect(
      (await call(a, 'LOCK', `/v1/states/${other}`, { token: admin, body: lockInfo(randomUUID()) }))
        .status,
    ).toBe(200);
    const reservations = (
      await call(a, 'GET', '/v1/api/reservations', { token: teamA.secret })
    ).json();
    expect(reservations.reservations.some((r: { state: string }) => r.state === other)).toBe(false);
    const everyone = (await call(a, 'GET', '/v1/api/reservations', { token: admin })).json();
    expect(everyone.reservations.some((r: { state: string }) => r.state === other)).toBe(true);
    const locks = (await call(a, 'GET', '/v1/api/locks', { token: teamA.secret })).json().locks;
    expect(locks.some((l: { name: string }) => l.name === other)).toBe(false);
    // The dashboard lists the same.
    const board = (await call(a, 'GET', '/v1/dashboard/states', { token: teamA.secret })).json();
    const boardNames = board.states.map((st: { name: string }) => st.name);
    expect(boardNames).toContain(own);
    expect(boardNames).not.toContain(other);
    // Its counts, when paged, count only what the token may read.
    const paged = await call(a, 'GET', '/v1/dashboard/states?glob=*&limit=1', {
      token: teamA.secret,
    });
    expect(paged.json()).toMatchObject({ total: boardNames.length, unfiltered: boardNames.length });
    expect(paged.json().states).toHaveLength(1);
    const boardAll = (await call(a, 'GET', '/v1/dashboard/states', { token: admin })).json();
    expect(boardAll.states.map((st: { name: string }) => st.name)).toContain(other);
    const drift = (await call(a, 'GET', '/v1/dashboard/drift', { token: teamA.secret })).json();
    expect(drift.drift.some((d: { state: string }) => d.state === other)).toBe(false);
    // The page itself holds no data and needs no token.
    expect((await call(a, 'GET', '/ui')).status).toBe(200);
  });

  it('read may read but not write; write implies read', async () => {
    const own = `shared/${randomUUID().slice(0, 8)}`;
    expect(
      (await call(a, 'POST', `/v1/states/${own}`, { token: admin, body: doc(1, randomUUID()) }))
        .status,
    ).toBe(200);
    expect((await call(a, 'GET', `/v1/states/${own}`, { token: teamA.secret })).status).toBe(200);
    const write = await call(a, 'LOCK', `/v1/states/${own}`, {
      token: teamA.secret,
      body: lockInfo(randomUUID()),
    });
    expect(write.status).toBe(403);
    expect(write.json().error.message).toContain(`may not write state ${own}`);
  });

  it('terraform force-unlock (UNLOCK with no body) needs admin as well as write', async () => {
    const own = `team-a/${randomUUID().slice(0, 8)}`;
    const id = randomUUID();
    expect(
      (await call(a, 'LOCK', `/v1/states/${own}`, { token: teamA.secret, body: lockInfo(id) }))
        .status,
    ).toBe(200);
    const forced = await call(a, 'UNLOCK', `/v1/states/${own}`, { token: teamA.secret });
    expect(forced.status).toBe(403);
    expect(forced.json().error.message).toContain('needs the admin scope');
    expect(
      (await call(a, 'UNLOCK', `/v1/states/${own}`, { token: teamA.secret, body: lockInfo(id) }))
        .status,
    ).toBe(200);
  });
});

describe('tokens', () => {
  it('list shows name, prefix, scopes, created, last used and expiry; never a secret or hash', async () => {
    const ci = await createToken(['read:x/*']);
    expect((await call(a, 'GET', '/v1/api/states', { token: ci.secret })).status).toBe(200);
    const list = await call(a, 'GET', '/v1/admin/tokens', { token: admin });
    const row = list.json().tokens.find((x: { name: string }) => x.name === ci.name);
    expect(row).toMatchObject({
      prefix: ci.secret.slice(0, 11),
      scopes: ['read:x/*'],
      created_by: expect.stringMatching(/^root/),
      expires_at: null,
    });
    expect(row.created_at).toMatch(/^2\d{3}-/);
    expect(list.text).not.toContain(ci.secret);
    expect(list.text).not.toMatch(/[0-9a-f]{64}/);
    // Last use is written in the background.
    let lastUsed: string | null = null;
    for (let i = 0; i < 50 && lastUsed === null; i++) {
      const l = await call(a, 'GET', '/v1/admin/tokens', { token: admin });
      lastUsed = l.json().tokens.find((x: { name: string }) => x.name === ci.name).last_used_at;
      if (lastUsed === null) await new Promise((r) => setTimeout(r, 50));
    }
    expect(lastUsed).toMatch(/^2\d{3}-/);
  });

  it('an expired token is refused', async () => {
    const name = `exp-${randomUUID().slice(0, 8)}`;
    const r = await call(a, 'POST', '/v1/admin/tokens', {
      token: admin,
      body: { name, scopes: ['read:*'], expires_at: new Date(Date.now() + 1500).toISOString() },
    });
    expect(r.status).toBe(201);
    const secret = r.json().token;
    expect((await call(a, 'GET', '/v1/api/states', { token: secret })).status).toBe(200);
    await new Promise((res) => setTimeout(res, 1600));
    const late = await call(a, 'GET', '/v1/api/states', { token: secret });
    expect(late.status).toBe(401);
    expect(late.json().error.message).toContain('expired');
  });

  it('revoked on one replica, the token is refused by the other within 1 s', async () => {
    const ci = await createToken(['read:*']);
    expect((await call(b, 'GET', '/v1/api/states', { token: ci.secret })).status).toBe(200);
    const revoked = await call(a, 'DELETE', `/v1/admin/tokens/${ci.name}`, { token: admin });
    expect(revoked.status).toBe(200);
    const since = Date.now();
    let status = 200;
    while (status === 200 && Date.now() - since < 1000) {
      status = (await call(b, 'GET', '/v1/api/states', { token: ci.secret })).status;
    }
    expect(status).toBe(401);
    expect(Date.now() - since).toBeLessThan(1000);
    const again = await call(b, 'GET', '/v1/api/states', { token: ci.secret });
    expect(again.json().error.message).toContain('was revoked');
  });

  it('records creation and revocation as events, and no secret anywhere in the database', async () => {
    const ci = await createToken(['read:*']);
    await call(a, 'DELETE', `/v1/admin/tokens/${ci.name}`, { token: admin });
    const dump = await dumpAllRows(t.url);
    expect(dump).toContain('TokenCreated');
    expect(dump).toContain('TokenRevoked');
    for (const secret of [admin, ci.secret]) {
      expect(dump).not.toContain(secret);
      expect(dump).not.toContain(secret.slice(3));
    }
  });
});

describe('start', () => {
  it('is refused on 0.0.0.0 when no token exists, before listening', async () => {
    const fresh = await createTestDatabase('kl_auth_fresh');
    try {
      const child = spawn(process.execPath, [KLD, 'serve', '--listen', '0.0.0.0:0'], {
        env: { ...process.env, KL_DATABASE_URL: fresh.url, KL_LOG_FORMAT: 'json' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.on('data', (c: Buffer) => (out += c.toString()));
      child.stderr.on('data', (c: Buffer) => (out += c.toString()));
      const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
      expect(code).toBe(2);
      expect(out).toContain(
        'kld: authentication is on (kld listens on 0.0.0.0:0, which is not loopback)',
      );
      expect(out).toContain('kld token create --name admin --scope admin');
      expect(out).not.toContain('kld listening');
    } finally {
      await fresh.drop();
    }
  });
});
