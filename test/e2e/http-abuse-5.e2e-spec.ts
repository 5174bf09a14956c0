import * as grpc from '@grpc/grpc-js';
import * as net from 'node:net';
import { bootstrapToken } from '../support/auth';
import { bearer, grpcEventsClient } from '../support/event-clients';
import { KldProcess, startKld } from '../support/kld-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { createToken, eventCount, jsonCall } from '../support/json-call';
import { until } from '../support/until';

/**
 * Hostile sweep 5: kld stopped while callers hold it every way they can,
 * the provider schema cache, the state engine's and refresh runs' inputs,
 * gRPC streams by the thousand. Each attack is made with a real token of
 * the weakest scope that reaches the route; kld answers it, stores nothing
 * it should not, and serves the others on.
 */

jest.setTimeout(180_000);

const doc = (serial: number, lineage: string, pad = 0) => ({
  version: 4,
  terraform_version: '1.11.4',
  serial,
  lineage,
  outputs: pad ? { pad: { value: 'x'.repeat(pad), type: 'string' } } : {},
  resources: [],
  check_results: null,
});

/** A raw HTTP request whose answer is never read (the socket paused): what a stuck client does. */
function neverRead(url: string, head: string, body = ''): net.Socket {
  const u = new URL(url);
  const socket = net.connect(Number(u.port), '127.0.0.1');
  socket.on('error', () => undefined);
  socket.pause();
  socket.write(`${head.replace('{host}', u.host)}\r\n\r\n${body}`);
  return socket;
}

type ErrorBody = { error?: { code?: string; message?: string } } | null;

/** An answer's JSON, null when it is not JSON. */
function errorBody(text: string): ErrorBody {
  try {
    return JSON.parse(text) as ErrorBody;
  } catch {
    return null;
  }
}

/**
 * A raw HTTP request, its body sent by the caller; `answer` is all kld sent until it
 * closed, `sent()` what it sent so far.
 */
function rawCall(
  url: string,
  head: string,
): { socket: net.Socket; answer: Promise<string>; sent: () => string } {
  const u = new URL(url);
  const socket = net.connect(Number(u.port), '127.0.0.1');
  socket.write(`${head.replace('{host}', u.host)}\r\n\r\n`);
  let text = '';
  const answer = new Promise<string>((resolve) => {
    socket.on('data', (d: Buffer) => (text += d.toString()));
    socket.on('close', () => resolve(text));
    socket.on('error', () => undefined);
  });
  return { socket, answer, sent: () => text };
}

describe('kld stopped while callers hold it', () => {
  let t: TestDatabase;
  let kld: KldProcess;
  let admin: string;

  beforeAll(async () => {
    t = await createTestDatabase('kl_http_abuse5_stop');
    admin = bootstrapToken(t.url, 'root', ['admin', 'write:*', 'query', 'events']).secret;
  });

  afterAll(async () => {
    await kld?.stop();
    await t?.drop();
  });

  it('exits promptly with status 0, and what it answered as stored is stored', async () => {
    kld = await startKld({ KL_DATABASE_URL: t.url, KL_AUTH: 'on' });
    const call = (method: string, path: string, body?: unknown) =>
      jsonCall(kld.url, admin, method, path, body);
    // A state big enough that an export of it fills the socket's buffers.
    for (let serial = 1; serial <= 4; serial++) {
      const r = await call('POST', '/v1/states/held/big', doc(serial, 'held', 4 << 20));
      expect(r.status).toBe(200);
    }
    expect((await call('POST', '/v1/states/held/small', doc(1, 'small'))).status).toBe(200);
    const lock = { ID: 'held-lock', Operation: 'OperationTypeApply', Who: 'ci' };
    expect((await call('LOCK', '/v1/states/held/small', lock)).status).toBe(200);

    const auth = `Authorization: Bearer ${admin}`;
    const held: net.Socket[] = [
      neverRead(kld.url, `GET /v1/events?from=start HTTP/1.1\r\nHost: {host}\r\n${auth}`),
      neverRead(kld.url, `GET /v1/archives/held/big HTTP/1.1\r\nHost: {host}\r\n${auth}`),
      // An upload that stops mid-body.
      neverRead(
        kld.url,
        `POST /v1/states/held/upload HTTP/1.1\r\nHost: {host}\r\n${auth}\r\n` +
          `Content-Type: application/json\r\nContent-Length: 1000000`,
        '{"version":4,',
      ),
    ];
    const grpcClient = grpcEventsClient(kld.grpc);
    const stream = grpcClient.Subscribe({ origin: 'ORIGIN_START' }, bearer(admin));
    stream.on('error', () => undefined);
    stream.pause();
    const longQuery = call('POST', '/v1/query', {
      sql: 'SELECT pg_sleep(120)',
      timeout_ms: 300_000,
    });
    // Running (the requests sent before it read by now): a fixed wait was a bet on a loaded machine.
    await until(
      'the long query to run',
      async () => {
        const [{ n }] = await t.db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE wait_event = 'PgSleep' AND datname = current_database()`,
        );
        return n > 0;
      },
      { everyMs: 50 },
    );

    // A commit whose body is still coming when the stop begins: it is read to
    // its end, stored and answered 200 (never a 500). In flight once kld asked
    // for its body (100 Continue): one whose headers kld had not read yet when
    // the stop began was an idle connection, closed at once.
    const body = JSON.stringify(doc(2, 'small'));
    const commit = rawCall(
      kld.url,
      `POST /v1/states/held/small?ID=held-lock HTTP/1.1\r\nHost: {host}\r\n${auth}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n` +
        'Expect: 100-continue',
    );
    const CONTINUE = 'HTTP/1.1 100 Continue\r\n\r\n';
    await until('kld to take the commit', async () => commit.sent().startsWith(CONTINUE), {
      everyMs: 50,
    });
    commit.socket.write(body.slice(0, 20));
    await new Promise((r) => setTimeout(r, 300));
    const stopped = kld.stop();
    await new Promise((r) => setTimeout(r, 500));
    commit.socket.write(body.slice(20));
    const [{ code }, queried] = await Promise.all([stopped, longQuery]);
    for (const s of held) s.destroy();
    grpcClient.close();
    expect(code).toBe(0);
    expect(kld.output()).toContain('"msg":"stopped"');
    expect(kld.output()).not.toContain('shutdown took too long');
    expect((await commit.answer).slice(CONTINUE.length)).toMatch(/^HTTP\/1\.1 200 /);
    expect(queried.status).toBe(503);
    expect(queried.body.error.code).toBe('SERVER.UNAVAILABLE');

    kld = await startKld({ KL_DATABASE_URL: t.url, KL_AUTH: 'on' });
    expect((await call('GET', '/v1/states/held/small')).body.serial).toBe(2);
    const locked = await call('LOCK', '/v1/states/held/small', { ...lock, ID: 'other' });
    expect(locked.status).toBe(423);
    expect((await call('GET', '/v1/states/held/big')).body.serial).toBe(4);
  });
});

describe('hostile callers of a running kld', () => {
  let t: TestDatabase;
  let kld: KldProcess;
  let admin: string;
  let teamA: string;
  let teamB: string;

  const call = (token: string, method: string, path: string, body?: unknown) =>
    jsonCall(kld.url, token, method, path, body);

  beforeAll(async () => {
    t = await createTestDatabase('kl_http_abuse5');
    admin = bootstrapToken(t.url, 'root', ['admin', 'write:*', 'query', 'events']).secret;
    kld = await startKld({ KL_DATABASE_URL: t.url, KL_AUTH: 'on' });
    const token = (name: string, scopes: string[]) => createToken(kld.url, admin, name, scopes);
    teamA = await token('team-a', ['write:team-a/*', 'events']);
    teamB = await token('team-b', ['write:team-b/*', 'events']);
    for (const name of ['team-a/net', 'team-b/app']) {
      expect((await call(admin, 'POST', `/v1/states/${name}`, doc(1, name))).status).toBe(200);
    }
  });

  afterAll(async () => {
    await kld?.stop();
    await t?.drop();
  });

  describe('the provider schema cache', () => {
    const block = (names: string[]) => ({
      block: {
        attributes: names.map((name) => ({ name, type: '"string"', optional: true })),
        blockTypes: [],
      },
    });
    const schema = (attribute: string) => ({
      protocolVersion: 5,
      provider: block(['region']),
      resourceSchemas: { example_thing: block([attribute]) },
      dataSourceSchemas: {},
    });
    const key = { source: 'example/poisoned', version: '1.0.0' };
    const get = (token: string) =>
      call(token, 'GET', `/v1/provider-schemas?source=${key.source}&version=${key.version}`);

    it("a write token's first schema of a version serves it alone, never another state's refresh", async () => {
      const wrong = schema('wrong');
      expect(
        (await call(teamA, 'PUT', '/v1/provider-schemas', { ...key, schema: wrong })).status,
      ).toBe(200);
      // team-a reads what it stored; nobody else is given it.
      expect(await get(teamA)).toEqual({ status: 200, body: { schema: wrong } });
      for (const token of [teamB, admin]) {
        const other = await get(token);
        expect(other.status).toBe(404);
        expect(other.body.error.code).toBe('PROVIDER_SCHEMA.NOT_FOUND');
      }
      // team-b stores the provider's own; it serves team-b, and team-a keeps its own.
      const right = schema('name');
      expect(
        (await call(teamB, 'PUT', '/v1/provider-schemas', { ...key, schema: right })).status,
      ).toBe(200);
      expect((await get(teamB)).body.schema).toEqual(right);
      expect((await get(teamA)).body.schema).toEqual(wrong);
      // Another try of team-a's is refused as before: its first stays.
      const again = await call(teamA, 'PUT', '/v1/provider-schemas', { ...key, schema: right });
      expect(again.status).toBe(409);
      expect(again.body.error.code).toBe('PROVIDER_SCHEMA.CONFLICT');
    });

    it("checks a provider config against trusted schemas only, never a token's own", async () => {
      const source = 'example/checked';
      // team-a's schema says the provider takes no `region`.
      const narrow = { ...schema('name'), provider: block(['only_this']) };
      const put = await call(teamA, 'PUT', '/v1/provider-schemas', {
        source,
        version: '1.0.0',
        schema: narrow,
      });
      expect(put.status).toBe(200);
      const configured = await call(admin, 'PUT', '/v1/provider-configs', {
        state: 'team-b/app',
        source,
        config: { region: 'eu-west-1' },
      });
      expect(configured.status).toBe(200);
    });

    it("an admin's schema (or kld's own) serves everyone, before any token's own", async () => {
      const right = schema('name');
      expect(
        (await call(admin, 'PUT', '/v1/provider-schemas', { ...key, schema: right })).status,
      ).toBe(200);
      for (const token of [admin, teamA, teamB]) {
        expect(await get(token)).toEqual({ status: 200, body: { schema: right } });
      }
    });
  });

  describe('gRPC streams by the dozen', () => {
    /** A Subscribe from the log's end: resolves with the stream once kld sent its first message. */
    const subscribe = (client: ReturnType<typeof grpcEventsClient>, token: string) =>
      new Promise<grpc.ClientReadableStream<Record<string, unknown>>>((resolve, reject) => {
        const stream = client.Subscribe({ origin: 'ORIGIN_END' }, bearer(token));
        stream.once('data', () => resolve(stream));
        stream.once('error', reject);
      });

    it("counts a caller's gRPC streams with its SSE subscriptions: one past the bound is refused, others are served", async () => {
      const client = grpcEventsClient(kld.grpc);
      const other = grpcEventsClient(kld.grpc);
      const held: grpc.ClientReadableStream<Record<string, unknown>>[] = [];
      try {
        // KL_CALLER_SUBSCRIPTIONS' default, all on one connection.
        for (let i = 0; i < 8; i++) held.push(await subscribe(client, teamA));
        for (const s of held) s.on('error', () => undefined);
        const refused = await subscribe(client, teamA).catch((e: grpc.ServiceError) => e);
        expect((refused as grpc.ServiceError).code).toBe(grpc.status.RESOURCE_EXHAUSTED);
        expect((refused as grpc.ServiceError).details).toMatch(
          /^REQUEST\.TOO_MANY: token "team-a" already has 8 event subscriptions in flight.*KL_CALLER_SUBSCRIPTIONS/,
        );
        // The same count over SSE.
        const sse = await fetch(`${kld.url}/v1/events?from=end`, {
          headers: { Authorization: `Bearer ${teamA}` },
        });
        expect(sse.status).toBe(429);
        expect(((await sse.json()) as { error: { code: string } }).error.code).toBe(
          'REQUEST.TOO_MANY',
        );
        // Another caller is served, and so is team-a once one of its streams ends.
        const theirs = await subscribe(other, teamB);
        theirs.on('error', () => undefined);
        theirs.cancel();
        held.pop()!.cancel();
        let again: grpc.ClientReadableStream<Record<string, unknown>> | null = null;
        for (let i = 0; i < 50 && again === null; i++) {
          again = await subscribe(client, teamA).catch(() => null);
          if (again === null) await new Promise((r) => setTimeout(r, 100));
        }
        expect(again).not.toBeNull();
        again!.on('error', () => undefined);
        held.push(again!);
      } finally {
        for (const s of held) s.cancel();
        client.close();
        other.close();
      }
    });
  });

  describe('state-engine and refresh inputs', () => {
    const instances = (n: number) =>
      Array.from({ length: n }, (_, i) => ({
        index_key: i,
        schema_version: 0,
        attributes: { id: `id-${i}` },
        sensitive_attributes: [],
      }));
    const engineDoc = (serial: number) => ({
      ...doc(serial, 'engine'),
      resources: [
        {
          mode: 'managed',
          type: 'terraform_data',
          name: 'web',
          provider: 'provider["terraform.io/builtin/terraform"]',
          instances: instances(3),
        },
      ],
    });
    const state = 'team-a/engine';

    beforeAll(async () => {
      expect((await call(admin, 'POST', `/v1/states/${state}`, engineDoc(1))).status).toBe(200);
    });

    /** Sends raw text (not JSON.stringify'd) when `body` is a string. */
    const send = async (token: string, method: string, path: string, body: unknown) => {
      const r = await fetch(`${kld.url}${path}`, {
        method,
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      });
      const text = await r.text();
      return { status: r.status, body: errorBody(text), text };
    };

    /** The state's version and serial, and team-b served meanwhile. */
    const unchanged = async () => {
      const r = await call(teamA, 'GET', `/v1/states/${state}`);
      expect([r.status, r.body.serial]).toEqual([200, 1]);
      expect((await call(teamB, 'GET', '/v1/states/team-b/app')).status).toBe(200);
    };

    it('scope and slice: a malformed request is a 400 naming what is wrong, nothing else', async () => {
      const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
      const bodies: [unknown, RegExp][] = [
        [{ addresses: 'terraform_data.web[0]' }, /addresses must be an array/],
        [{ addresses: [1, null] }, /addresses\[0\] must be a string/],
        [`{"addresses": ${deep(5000)}}`, /nests deeper than 1000 levels/],
        [`{"selectors": [${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}]}`, /nests deeper/],
        [{ addresses: ['terraform_data.web[0]', 'a\ud800b'] }, /unpaired UTF-16 surrogate/],
        [{ addresses: ['terraform_data.web\u0000'] }, /NUL character/],
        [{ module_prefixes: ['module.' + '*'.repeat(10000)] }, /longer than 800 bytes/],
        [{ selectors: [{ type: 5 }] }, /selectors\[0\]\.type must be a string/],
        [{ addresses: [], bogus: 1 }, /bogus is not a known member/],
        [[1, 2], /must be a JSON object/],
        ['null', /must be a JSON object/],
        ['{addresses', /is not valid JSON/],
      ];
      for (const route of ['scope', 'slice']) {
        for (const [body, why] of bodies) {
          const r = await send(teamA, 'POST', `/v1/engine/states/${state}/${route}`, body);
          expect([route, r.status, r.body?.error?.code]).toEqual([route, 400, 'REQUEST.INVALID']);
          expect(r.body!.error!.message).toMatch(why);
        }
      }
      for (const version of [0, -1, 1.5, 1e30, '1']) {
        const r = await send(teamA, 'POST', `/v1/engine/states/${state}/slice`, {
          addresses: ['terraform_data.web[0]'],
          version,
        });
        expect([r.status, r.body?.error?.code]).toEqual([400, 'REQUEST.INVALID']);
      }
      await unchanged();
    });

    it('a slice asking 100,000 addresses of a 3-instance state holds the 3', async () => {
      const addresses = Array.from({ length: 100_000 }, (_, i) => `terraform_data.web[${i}]`);
      const r = await fetch(`${kld.url}/v1/engine/states/${state}/slice`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${teamA}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ addresses }),
      });
      expect(r.status).toBe(200);
      expect(r.headers.get('x-kilolock-slice-instances')).toBe('3');
      await r.arrayBuffer();
      await unchanged();
    });

    const refreshResult = (i: number | string, outcome = 'unchanged', extra: object = {}) => ({
      address: typeof i === 'number' ? `terraform_data.web[${i}]` : i,
      provider: 'provider["terraform.io/builtin/terraform"]',
      outcome,
      before_hash: 'b',
      after_hash: outcome === 'drifted' ? 'c' : 'b',
      changed_paths: outcome === 'drifted' ? ['id'] : [],
      ...extra,
    });
    const eventsOf = (stream: string) => eventCount(kld.url, admin, stream);

    it('refresh results: a batch naming one instance 100,000 times records its last result once', async () => {
      const started = await call(teamA, 'POST', '/v1/refresh-runs', { state, dry_run: true });
      expect(started.status).toBe(201);
      const run = started.body.run_id as string;
      const flipping = Array.from({ length: 100_000 }, (_, i) =>
        refreshResult(0, i % 2 === 0 ? 'unchanged' : 'drifted'),
      );
      const r = await call(teamA, 'POST', `/v1/refresh-runs/${run}/results`, { results: flipping });
      expect(r.status).toBe(200);
      expect(await eventsOf(`refresh-${run}`)).toBe(2); // RefreshStarted, one ResourceRefreshed
      expect((await call(teamA, 'GET', `/v1/refresh-runs/${run}`)).body).toMatchObject({
        checked: 1,
        changed: 1,
      });
      expect(
        (await call(teamA, 'POST', `/v1/refresh-runs/${run}/finish`, { status: 'cancelled' }))
          .status,
      ).toBe(200);
      await unchanged();
    });

    it('refresh and apply runs: results and heartbeats out of order or of another run are refused, nothing stored', async () => {
      const started = await call(teamA, 'POST', '/v1/refresh-runs', { state, dry_run: true });
      const run = started.body.run_id as string;
      const results = `/v1/refresh-runs/${run}/results`;
      const apply = `/v1/api/states/${state}/apply-runs`;
      const applied = await call(teamA, 'POST', apply, {
        base_version: 1,
        write: ['terraform_data.web[0]'],
      });
      expect(applied.status).toBe(201);
      const id = applied.body.run_id as string;
      const refusals: [string, string, string, unknown, number, string][] = [
        [
          teamA,
          'POST',
          results,
          { results: [refreshResult('terraform_data.nope[7]')] },
          400,
          'REFRESH.INVALID',
        ],
        [
          teamA,
          'POST',
          results,
          { results: [refreshResult('terraform_data.web["' + 'x'.repeat(1 << 20) + '"]')] },
          400,
          'REQUEST.INVALID',
        ],
        [teamA, 'POST', results, { results: [refreshResult(1, 'weird')] }, 400, 'REQUEST.INVALID'],
        [
          teamA,
          'POST',
          results,
          { results: [refreshResult(1, 'unchanged', { before_hash: 5 })] },
          400,
          'REQUEST.INVALID',
        ],
        [teamA, 'POST', results, { results: 'x' }, 400, 'REQUEST.INVALID'],
        // another team's run: not found, as a made-up id (its state is not named)
        [teamB, 'POST', results, { results: [refreshResult(0)] }, 404, 'REFRESH.NOT_FOUND'],
        [
          teamA,
          'POST',
          '/v1/refresh-runs/not-a-run/results',
          { results: [refreshResult(0)] },
          404,
          'REFRESH.NOT_FOUND',
        ],
        [
          teamA,
          'POST',
          `/v1/refresh-runs/${run}/finish`,
          { status: 'done' },
          400,
          'REQUEST.INVALID',
        ],
        [teamA, 'POST', `${apply}/not-a-run/heartbeat`, {}, 400, 'REQUEST.INVALID'],
        [teamA, 'POST', `${apply}/${id}/heartbeat`, { lease_seconds: -1 }, 400, 'APPLY.INVALID'],
        [teamA, 'POST', `${apply}/${id}/heartbeat`, { lease_seconds: '5' }, 400, 'REQUEST.INVALID'],
        [teamA, 'POST', `${apply}/${id}/heartbeat`, '[]', 400, 'REQUEST.INVALID'],
        [teamA, 'POST', `${apply}/${id}/finish`, { status: 'committed' }, 400, 'REQUEST.INVALID'],
        [teamB, 'POST', `${apply}/${id}/heartbeat`, {}, 403, 'AUTH.FORBIDDEN'],
      ];
      const before = [await eventsOf(`refresh-${run}`), await eventsOf(`apply-${id}`)];
      for (const [token, method, path, body, status, code] of refusals) {
        const r = await send(token, method, path, body);
        expect([path.slice(0, 60), r.status, r.body?.error?.code]).toEqual([
          path.slice(0, 60),
          status,
          code,
        ]);
      }
      expect([await eventsOf(`refresh-${run}`), await eventsOf(`apply-${id}`)]).toEqual(before);
      // Once finished, every later call is a 409 and changes nothing.
      expect(
        (await call(teamA, 'POST', `/v1/refresh-runs/${run}/finish`, { status: 'cancelled' }))
          .status,
      ).toBe(200);
      expect(
        (await call(teamA, 'POST', `${apply}/${id}/finish`, { status: 'failed' })).status,
      ).toBe(200);
      const ended = [await eventsOf(`refresh-${run}`), await eventsOf(`apply-${id}`)];
      const late: [string, unknown, string][] = [
        [results, { results: [refreshResult(1)] }, 'REFRESH.FINISHED'],
        [`/v1/refresh-runs/${run}/finish`, { status: 'failed' }, 'REFRESH.FINISHED'],
        [`${apply}/${id}/heartbeat`, {}, 'APPLY.FINISHED'],
        [
          `${apply}/${id}/commit`,
          { base_version: 1, terraform_version: '1.11.4', deletes: ['terraform_data.web[0]'] },
          'APPLY.FINISHED',
        ],
        [`${apply}/${id}/finish`, { status: 'aborted' }, 'APPLY.FINISHED'],
      ];
      for (const [path, body, code] of late) {
        const r = await send(teamA, 'POST', path, body);
        expect([path.slice(-40), r.status, r.body?.error?.code]).toEqual([
          path.slice(-40),
          409,
          code,
        ]);
      }
      expect([await eventsOf(`refresh-${run}`), await eventsOf(`apply-${id}`)]).toEqual(ended);
      await unchanged();
    });
  });
});
