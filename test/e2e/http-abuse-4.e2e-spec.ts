import * as grpc from '@grpc/grpc-js';
import * as http from 'node:http';
import * as net from 'node:net';
import { bootstrapToken } from '../support/auth';
import { KldProcess, startKld } from '../support/kld-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { createToken, jsonCall, type JsonAnswer } from '../support/json-call';

/**
 * A hostile caller of kld, with and without a token: bodies declared huge
 * and never sent, one query token against the other callers of the SQL
 * surface (their statements' text, their sessions), a browser opening
 * kld's answers, more connections than kld has file descriptors, gRPC
 * requests too big or not protobuf. Each is refused, or costs kld only what
 * was actually sent, and kld serves on.
 */

jest.setTimeout(120_000);

let t: TestDatabase;
let kld: KldProcess;
let admin: string;
let teamA: string;
let teamB: string;

const call = (token: string, method: string, path: string, body?: unknown) =>
  jsonCall(kld.url, token, method, path, body);

const query = (token: string, sql: string) => call(token, 'POST', '/v1/query', { sql });

const doc = (serial: number) => ({
  version: 4,
  terraform_version: '1.11.4',
  serial,
  lineage: 'abuse-4',
  outputs: {},
  resources: [],
  check_results: null,
});

beforeAll(async () => {
  t = await createTestDatabase('kl_http_abuse4');
  admin = bootstrapToken(t.url, 'root', ['admin', 'write:*', 'query', 'metrics', 'events']).secret;
  kld = await startKld({ KL_DATABASE_URL: t.url, KL_AUTH: 'on' });
  const token = (name: string, scopes: string[]) => createToken(kld.url, admin, name, scopes);
  teamA = await token('team-a', ['write:team-a/*', 'query']);
  teamB = await token('team-b', ['write:team-b/*', 'query']);
  for (const name of ['team-a/net', 'team-b/secret']) {
    expect((await call(admin, 'POST', `/v1/states/${name}`, doc(1))).status).toBe(200);
  }
});

afterAll(async () => {
  await kld?.stop();
  await t?.drop();
});

/** Opens a POST that declares `length` bytes of body and sends `sent` of them. */
function declareAndStall(path: string, token: string | null, length: number, sent: number) {
  const socket = net.connect(Number(new URL(kld.url).port), '127.0.0.1');
  let answer = '';
  socket.on('data', (d) => (answer += d.toString()));
  socket.on('error', () => undefined);
  socket.write(
    `POST ${path} HTTP/1.1\r\nHost: ${new URL(kld.url).host}\r\n` +
      (token === null ? '' : `Authorization: Bearer ${token}\r\n`) +
      `Content-Type: application/json\r\nContent-Length: ${length}\r\n\r\n` +
      ' '.repeat(sent),
  );
  return { socket, answer: () => answer };
}

async function externalMemory(): Promise<number> {
  const r = await fetch(`${kld.url}/metrics`, { headers: { Authorization: `Bearer ${admin}` } });
  const line = /^nodejs_external_memory_bytes (\S+)$/m.exec(await r.text());
  return Number(line![1]);
}

describe('bodies declared huge and never sent', () => {
  const HUGE = 512 * 2 ** 20; // KL_MAX_STATE_BYTES' default

  it('costs kld what arrived, not what was declared, and it serves on', async () => {
    const stalled = Array.from({ length: 20 }, (_, i) =>
      declareAndStall(`/v1/states/team-a/stall-${i}`, teamA, HUGE, 1024),
    );
    try {
      // Their handlers began before this commit's: it waits behind them for the database.
      expect((await call(teamA, 'POST', '/v1/states/team-a/net', doc(2))).status).toBe(200);
      expect((await call(teamA, 'GET', '/v1/states/team-a/net')).body.serial).toBe(2);
      // 20 declared 10 GiB between them; 1 KiB each came.
      expect(await externalMemory()).toBeLessThan(2 ** 30);
    } finally {
      for (const s of stalled) s.socket.destroy();
    }
  });

  it('answers 401 without a valid token before reading any of the body', async () => {
    for (const token of [null, 'kl_not-a-token']) {
      const stalled = declareAndStall('/v1/states/team-a/net', token, HUGE, 0);
      try {
        for (let i = 0; i < 100 && !stalled.answer().includes('\r\n\r\n{'); i++) {
          await new Promise((r) => setTimeout(r, 50));
        }
        expect(stalled.answer()).toMatch(/^HTTP\/1\.1 401 /);
        expect(stalled.answer()).toContain('"code":"AUTH.UNAUTHENTICATED"');
      } finally {
        stalled.socket.destroy();
      }
    }
  });
});

describe('one query token against the other callers of the SQL surface', () => {
  it("sees no other caller's statement, and cannot cancel or end its session", async () => {
    // team-b runs a statement that names its state; it reads kl_query.states
    // while it sleeps, which is how team-a can tell it is running.
    const running = query(
      teamB,
      "EXPLAIN ANALYZE SELECT pg_sleep(4), 'team-b/secret' AS mine FROM kl_query.states",
    );
    let started = false;
    for (let i = 0; i < 100 && !started; i++) {
      const r = await query(
        teamA,
        `SELECT count(*) AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
          JOIN pg_namespace ns ON ns.oid = c.relnamespace
         WHERE ns.nspname = 'kl_query' AND c.relname = 'states' AND l.pid <> pg_backend_pid()`,
      );
      started = r.body.rows[0][0] > 0;
    }
    expect(started).toBe(true);
    const seen = await query(
      teamA,
      "SELECT query FROM pg_stat_activity WHERE query LIKE '%team-b' || '/secret%'",
    );
    expect(seen).toMatchObject({ status: 200, body: { rows: [] } });
    for (const fn of ['pg_cancel_backend(pid)', 'pg_terminate_backend(pid)']) {
      const r = await query(
        teamA,
        `SELECT ${fn} FROM pg_stat_activity WHERE usename = 'kl_reader' AND pid <> pg_backend_pid()`,
      );
      expect({ status: r.status, code: r.body.error?.code }).toEqual({
        status: 400,
        code: 'QUERY.FORBIDDEN',
      });
    }
    const answered = await running;
    expect(answered.status).toBe(200);
    expect(JSON.stringify(answered.body.rows)).toContain('Execution Time');
  });

  it('still cancels a query that takes an advisory lock (kld cancels as the owner)', async () => {
    // Uncancelled, it would hold the lock for 5 minutes (and this test its whole timeout).
    const r = await call(teamA, 'POST', '/v1/query', {
      sql: 'SELECT pg_advisory_xact_lock(4242), pg_sleep(300)',
      timeout_ms: 300_000,
    });
    expect({ status: r.status, code: r.body.error?.code }).toEqual({
      status: 400,
      code: 'QUERY.FORBIDDEN',
    });
    expect(r.body.error.message).toContain('advisory lock');
  });
});

describe("what a browser makes of kld's answers", () => {
  const headersOf = async (path: string, token: string | null = admin) => {
    const r = await fetch(`${kld.url}${path}`, {
      headers: token === null ? {} : { Authorization: `Bearer ${token}` },
    });
    await r.arrayBuffer();
    return {
      status: r.status,
      nosniff: r.headers.get('x-content-type-options'),
      frame: r.headers.get('x-frame-options'),
      csp: r.headers.get('content-security-policy'),
    };
  };

  it('marks every API answer as data a page may neither sniff, run nor frame, refusals too', async () => {
    const api = {
      nosniff: 'nosniff',
      frame: 'DENY',
      csp: "default-src 'none'; frame-ancestors 'none'; sandbox",
    };
    expect(await headersOf('/v1/states/team-a/net')).toEqual({ status: 200, ...api });
    expect(await headersOf('/v1/api/states')).toEqual({ status: 200, ...api });
    expect(await headersOf('/v1/states/team-a/net', null)).toEqual({ status: 401, ...api });
    expect(await headersOf('/v1/no-such-route')).toEqual({ status: 404, ...api });
    expect(await headersOf('/metrics')).toEqual({ status: 200, ...api });
  });

  it('keeps the pages their own policies: the dashboard its own, the Swagger UI none', async () => {
    const ui = await headersOf('/ui', null);
    expect(ui).toMatchObject({ status: 200, nosniff: 'nosniff', frame: 'DENY' });
    expect(ui.csp).toContain("script-src 'self'");
    expect(ui.csp).toContain("frame-ancestors 'none'");
    expect(await headersOf('/docs', null)).toEqual({
      status: 200,
      nosniff: 'nosniff',
      frame: 'DENY',
      csp: null,
    });
  });
});

describe('connections by the thousand', () => {
  it('keeps file descriptors for itself: more connections than its limit leave it ready and committing', async () => {
    const low = await startKld({ KL_DATABASE_URL: t.url, KL_AUTH: 'on' }, 30_000, {
      openFiles: 512,
    });
    const port = Number(new URL(low.url).port);
    // An honest client's connection, open before the flood and kept alive.
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const send = (method: string, path: string, body?: unknown) =>
      new Promise<JsonAnswer>((resolve, reject) => {
        const req = http.request(
          `${low.url}${path}`,
          {
            method,
            agent,
            headers: { Authorization: `Bearer ${teamA}`, 'Content-Type': 'application/json' },
          },
          (res) => {
            let text = '';
            res.on('data', (c) => (text += c));
            res.on('end', () =>
              resolve({ status: res.statusCode!, body: text === '' ? null : JSON.parse(text) }),
            );
          },
        );
        req.on('error', reject);
        req.end(body === undefined ? undefined : JSON.stringify(body));
      });
    const sockets: net.Socket[] = [];
    try {
      expect((await send('GET', '/healthz')).status).toBe(200);
      // Each is kept up to 66 s without sending a byte.
      await Promise.all(
        Array.from(
          { length: 600 },
          () =>
            new Promise<void>((resolve) => {
              const s = net.connect(port, '127.0.0.1', () => resolve());
              s.on('error', () => resolve());
              sockets.push(s);
            }),
        ),
      );
      expect(await send('GET', '/readyz')).toMatchObject({
        status: 200,
        body: { status: 'ready' },
      });
      expect((await send('POST', '/v1/states/team-a/many', doc(1))).status).toBe(200);
    } finally {
      for (const s of sockets) s.destroy();
      agent.destroy();
    }
    try {
      // Once they are gone, new connections are taken again.
      let status = 0;
      for (let i = 0; i < 50 && status !== 200; i++) {
        status = await fetch(`${low.url}/healthz`).then(
          (r) => r.status,
          () => 0,
        );
        if (status !== 200) await new Promise((r) => setTimeout(r, 100));
      }
      expect(status).toBe(200);
    } finally {
      await low.stop();
    }
  });
});

describe('hostile gRPC requests', () => {
  const raw = (b: Buffer) => b;
  const Events = grpc.makeGenericClientConstructor(
    {
      Subscribe: {
        path: '/kilolock.v1.Events/Subscribe',
        requestStream: false,
        responseStream: true,
        requestSerialize: raw,
        requestDeserialize: raw,
        responseSerialize: raw,
        responseDeserialize: raw,
      },
    },
    'Events',
  );

  /** The status a Subscribe of these request bytes ends with, and how many messages came first. */
  function subscribe(bytes: Buffer, token: string | null) {
    const client = new Events(kld.grpc, grpc.credentials.createInsecure(), {
      'grpc.max_send_message_length': 64 << 20,
    });
    const metadata = new grpc.Metadata();
    if (token !== null) metadata.set('authorization', `Bearer ${token}`);
    return new Promise<{ code: number; details: string; messages: number }>((resolve) => {
      let messages = 0;
      const call = client.Subscribe(bytes, metadata);
      call.on('data', () => messages++);
      call.on('error', (e: grpc.ServiceError) => {
        client.close();
        resolve({ code: e.code, details: e.details, messages });
      });
    });
  }

  it('refuses what is too big, not protobuf or unauthenticated before any message, and serves on', async () => {
    const from = (text: Buffer) => Buffer.concat([Buffer.from([0x0a]), varint(text.length), text]);
    expect(await subscribe(from(Buffer.alloc(5 << 20, 0x41)), admin)).toMatchObject({
      code: grpc.status.RESOURCE_EXHAUSTED,
      messages: 0,
    });
    // A million groups opened one inside another (field 15, which the request
    // does not have: 0x33, field 6, is max_message_bytes since wave 23).
    expect(await subscribe(Buffer.alloc(1_000_000, 0x7b), admin)).toMatchObject({
      code: grpc.status.INTERNAL,
      details: 'Error deserializing request',
      messages: 0,
    });
    expect(await subscribe(from(Buffer.alloc(3 << 20, 0x41)), admin)).toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      messages: 0,
    });
    for (const token of [null, 'kl_not-a-token']) {
      expect(await subscribe(Buffer.alloc(0), token)).toMatchObject({
        code: grpc.status.UNAUTHENTICATED,
        messages: 0,
      });
    }
    expect((await fetch(`${kld.url}/healthz`)).status).toBe(200);
  });
});

function varint(n: number): Buffer {
  const out: number[] = [];
  for (; n > 127; n = Math.floor(n / 128)) out.push((n & 127) | 128);
  out.push(n);
  return Buffer.from(out);
}
