import * as http from 'node:http';
import { Client } from 'pg';
import { bootstrapToken } from '../support/auth';
import { KldProcess, startKld } from '../support/kld-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/**
 * One token's flood of heavy requests (queries, event subscriptions,
 * archive exports) past its per-caller bound: the excess is refused at
 * once (429 REQUEST.TOO_MANY, Retry-After), while another token's requests
 * and terraform's GET and LOCK of a state are answered as the flood holds
 * its slots; once the flood's requests end, its token is served again.
 */

jest.setTimeout(180_000);

let t: TestDatabase;
let kld: KldProcess;
const tokens: Record<string, string> = {};
const SLEEP = 'SELECT pg_sleep(600)';

const doc = (serial: number, outputs: Record<string, unknown> = {}) =>
  JSON.stringify({
    version: 4,
    terraform_version: '1.11.4',
    serial,
    lineage: 'lineage-1',
    outputs,
    resources: [],
  });

async function call(token: string, method: string, path: string, body?: unknown) {
  const r = await fetch(`${kld.url}${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
    },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, retryAfter: r.headers.get('retry-after'), text };
}

const query = (token: string, sql = 'SELECT 1 AS one') =>
  call(token, 'POST', '/v1/query', { sql, timeout_ms: 300_000 });

/** Terraform's own requests: basic auth with the token as the password. */
function terraform(token: string, method: string, body?: string, state = 'team/shared') {
  return fetch(`${kld.url}/v1/states/${state}`, {
    method,
    headers: {
      Authorization: `Basic ${Buffer.from(`terraform:${token}`).toString('base64')}`,
      'Content-Type': 'application/json',
    },
    body,
  });
}

/** A streamed GET that stays open (its body never read) until `close()`; resolves once answered. */
function held(token: string, path: string): Promise<{ status: number; close: () => void }> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${kld.url}${path}`, { headers: { Authorization: `Bearer ${token}` } });
    req.on('response', (res) => {
      res.pause();
      resolve({ status: res.statusCode ?? 0, close: () => req.destroy() });
    });
    req.on('error', reject);
  });
}

async function sessionsSleeping(): Promise<number> {
  const c = new Client({ connectionString: t.url });
  await c.connect();
  try {
    // The statement kld runs may wrap the SQL (a cursor): pg_sleep shows as a wait event.
    const r = await c.query<{ n: string }>(
      `SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND datname = current_database()`,
    );
    return Number(r.rows[0]!.n);
  } finally {
    await c.end();
  }
}

/** Until `ok()`; a slot frees when kld sees the request's end, a moment after the client does. */
async function eventually<T>(what: string, attempt: () => Promise<T>, ok: (v: T) => boolean) {
  for (let i = 0; i < 300; i++) {
    const v = await attempt();
    if (ok(v)) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`never: ${what}`);
}

function refusal(r: { status: number; retryAfter: string | null; text: string }) {
  expect(r.status).toBe(429);
  expect(r.retryAfter).toBe('1');
  return (JSON.parse(r.text) as { error: { code: string; message: string } }).error;
}

beforeAll(async () => {
  t = await createTestDatabase('kl_caller_bounds');
  const boot = bootstrapToken(t.url, 'root', ['admin', 'write:*']);
  expect(boot.code).toBe(0);
  tokens.root = boot.secret;
  kld = await startKld(
    {
      KL_DATABASE_URL: t.url,
      KL_AUTH: 'on',
      KL_CALLER_QUERIES: '2',
      KL_CALLER_SUBSCRIPTIONS: '2',
      KL_CALLER_EXPORTS: '1',
    },
    90_000,
  );
  for (const name of ['flood', 'other']) {
    const r = await call(tokens.root, 'POST', '/v1/admin/tokens', {
      name,
      scopes: ['query', 'events', 'write:*'],
    });
    expect(r.status).toBe(201);
    tokens[name] = (JSON.parse(r.text) as { token: string }).token;
  }
  expect((await terraform(tokens.root, 'POST', doc(1))).status).toBe(200);
  // An export of this one outgrows the sockets' buffers: a client that does not read holds it open.
  for (const serial of [1, 2, 3, 4]) {
    const blob = { type: 'string', value: String(serial).repeat(4 * 1024 * 1024) };
    expect((await terraform(tokens.root, 'POST', doc(serial, { blob }), 'team/big')).status).toBe(
      200,
    );
  }
});

afterAll(async () => {
  await kld?.stop();
  await t?.drop();
});

it('a token past its bound of queries is refused at once; others are served meanwhile', async () => {
  const flood = [query(tokens.flood, SLEEP), query(tokens.flood, SLEEP)];
  await eventually('the flood’s queries run', sessionsSleeping, (n) => n === 2);

  const error = refusal(await query(tokens.flood));
  expect(error.code).toBe('REQUEST.TOO_MANY');
  expect(error.message).toBe(
    'token "flood" already has 2 queries (POST /v1/query) in flight, the most one caller may have at once (KL_CALLER_QUERIES=2); retry when one ends, or ask the operator to raise KL_CALLER_QUERIES',
  );

  const other = await query(tokens.other);
  expect(other.status).toBe(200);
  expect(JSON.parse(other.text).rows).toEqual([[1]]);
  const get = await terraform(tokens.other, 'GET');
  expect(get.status).toBe(200);
  expect(((await get.json()) as { serial: number }).serial).toBe(1);

  // The flood's queries end (cancelled), and its token is served again.
  const c = new Client({ connectionString: t.url });
  await c.connect();
  await c.query(
    `SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND datname = current_database()`,
  );
  await c.end();
  expect((await Promise.all(flood)).map((r) => r.status)).toEqual([400, 400]);
  const again = await eventually(
    'the flood’s token is served again',
    () => query(tokens.flood),
    (r) => r.status !== 429,
  );
  expect(again.status).toBe(200);
});

it('event subscriptions and exports held open: the excess is refused, terraform is not', async () => {
  const subscriptions = [
    await held(tokens.flood, '/v1/events?follow=true'),
    await held(tokens.flood, '/v1/events?follow=true'),
  ];
  expect(subscriptions.map((s) => s.status)).toEqual([200, 200]);
  const error = refusal(await call(tokens.flood, 'GET', '/v1/events?follow=false'));
  expect(error.message).toMatch(/^token "flood" already has 2 event subscriptions in flight/);
  const other = await call(tokens.other, 'GET', '/v1/events?follow=false');
  expect(other.status).toBe(200);

  const exporting = await held(tokens.flood, '/v1/archives/team/big');
  expect(exporting.status).toBe(200);
  expect(refusal(await call(tokens.flood, 'GET', '/v1/archives/team/shared')).message).toMatch(
    /KL_CALLER_EXPORTS=1/,
  );
  expect((await call(tokens.other, 'GET', '/v1/archives/team/big')).status).toBe(200);

  // Terraform's own routes are never counted: its GET, LOCK, UNLOCK with the flooding token.
  const info = JSON.stringify({ ID: '00000000-0000-4000-8000-000000000001', Who: 'ci' });
  expect((await terraform(tokens.flood, 'GET')).status).toBe(200);
  expect((await terraform(tokens.flood, 'LOCK', info)).status).toBe(200);
  expect((await terraform(tokens.flood, 'UNLOCK', info)).status).toBe(200);

  for (const s of [...subscriptions, exporting]) s.close();
  const again = await eventually(
    'the flood’s token subscribes again',
    () => call(tokens.flood, 'GET', '/v1/events?follow=false'),
    (r) => r.status !== 429,
  );
  expect(again.status).toBe(200);
  const exported = await eventually(
    'the flood’s token exports again',
    () => call(tokens.flood, 'GET', '/v1/archives/team/shared'),
    (r) => r.status !== 429,
  );
  expect(exported.status).toBe(200);
});

/** A streamed GET answered and then not read until `read()`, which takes the rest of its body. */
function paused(
  url: string,
  token: string,
  path: string,
): Promise<{ status: number; read: (until: (text: string) => boolean) => Promise<string> }> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${url}${path}`, { headers: { Authorization: `Bearer ${token}` } });
    req.on('response', (res) => {
      res.pause();
      res.setEncoding('utf8');
      // Cut when the test ends it or kld stops: nothing to report then.
      res.on('error', () => undefined);
      const read = (until: (text: string) => boolean) =>
        new Promise<string>((done, fail) => {
          let text = '';
          const finish = () => {
            req.destroy();
            done(text);
          };
          res.on('data', (c: string) => {
            text += c;
            if (until(text)) finish();
          });
          res.on('end', finish);
          res.on('error', fail);
          res.resume();
        });
      resolve({ status: res.statusCode ?? 0, read });
    });
    req.on('error', reject);
  });
}

const eventIds = (sse: string) =>
  sse
    .split('\n\n')
    // What follows the last blank line is a frame still arriving.
    .slice(0, -1)
    .filter((f) => f.startsWith('id: ') && !f.includes('\nevent: '))
    .map((f) => (JSON.parse(f.slice(f.indexOf('\ndata: ') + 7)) as { eventId: string }).eventId);

it('heavy requests of several tokens, each within its own bound: past the bound across callers they are refused, terraform is served, and the held readers then get everything in order', async () => {
  const shared = await startKld(
    {
      KL_DATABASE_URL: t.url,
      KL_AUTH: 'on',
      KL_TOTAL_SUBSCRIPTIONS: '3',
      KL_TOTAL_EXPORTS: '2',
    },
    90_000,
  );
  try {
    const made = await call(tokens.root!, 'POST', '/v1/admin/tokens', {
      name: 'third',
      scopes: ['events', 'write:*'],
    });
    expect(made.status).toBe(201);
    const third = (JSON.parse(made.text) as { token: string }).token;
    const readers = [
      await paused(shared.url, tokens.flood!, '/v1/events?follow=true'),
      await paused(shared.url, tokens.other!, '/v1/events?follow=true'),
      await paused(shared.url, third, '/v1/events?follow=true'),
    ];
    expect(readers.map((r) => r.status)).toEqual([200, 200, 200]);
    // flood has 1 of the 8 one caller may hold: the bound across callers refuses it.
    const subscribe = await fetch(`${shared.url}/v1/events?follow=false`, {
      headers: { Authorization: `Bearer ${tokens.flood}` },
    });
    const subscribeRefusal = refusal({
      status: subscribe.status,
      retryAfter: subscribe.headers.get('retry-after'),
      text: await subscribe.text(),
    });
    expect(subscribeRefusal.code).toBe('REQUEST.TOO_MANY');
    expect(subscribeRefusal.message).toMatch(/from all callers.*KL_TOTAL_SUBSCRIPTIONS=3/);

    const exports = [
      await paused(shared.url, tokens.flood!, '/v1/archives/team/big'),
      await paused(shared.url, tokens.other!, '/v1/archives/team/big'),
    ];
    expect(exports.map((e) => e.status)).toEqual([200, 200]);
    const exporting = await fetch(`${shared.url}/v1/archives/team/shared`, {
      headers: { Authorization: `Bearer ${tokens.root}` },
    });
    expect(
      refusal({
        status: exporting.status,
        retryAfter: exporting.headers.get('retry-after'),
        text: await exporting.text(),
      }).message,
    ).toMatch(/KL_TOTAL_EXPORTS=2/);

    // Terraform's cycle on another state, while every heavy reader holds its slot.
    const tf = (method: string, body?: string) =>
      fetch(`${shared.url}/v1/states/team/other`, {
        method,
        headers: {
          Authorization: `Basic ${Buffer.from(`terraform:${tokens.root}`).toString('base64')}`,
          'Content-Type': 'application/json',
        },
        body,
      });
    const info = JSON.stringify({ ID: '00000000-0000-4000-8000-000000000002', Who: 'ci' });
    expect((await tf('POST', doc(1))).status).toBe(200);
    expect((await tf('LOCK', info)).status).toBe(200);
    expect((await tf('GET')).status).toBe(200);
    expect((await tf('UNLOCK', info)).status).toBe(200);

    // The held readers: every event of the log, once, in its order; the whole archive.
    // The whole log as the other kld (same database) reads it, from a reader not held.
    const log = await call(tokens.other!, 'GET', '/v1/events?follow=false');
    expect(log.status).toBe(200);
    const all = eventIds(log.text);
    expect(all.length).toBeGreaterThan(5);
    const seen = await readers[0]!.read((text) => eventIds(text).length >= all.length);
    expect(eventIds(seen).slice(0, all.length)).toEqual(all);
    const archive = await exports[0]!.read(() => false);
    const [header, ...lines] = archive.trimEnd().split('\n');
    expect(lines).toHaveLength((JSON.parse(header!) as { events: number }).events);
    expect(lines.map((l) => (JSON.parse(l) as { revision: number }).revision)).toEqual(
      lines.map((_, i) => i),
    );
  } finally {
    await shared.stop();
  }
});

it('with authentication off, a caller is the actor it names and its address', async () => {
  const open = await startKld(
    { KL_DATABASE_URL: t.url, KL_AUTH: 'off', KL_CALLER_SUBSCRIPTIONS: '1' },
    90_000,
  );
  const subscribe = (actor: string) =>
    new Promise<{ status: number; text: string; close: () => void }>((resolve, reject) => {
      const req = http.get(`${open.url}/v1/events?follow=true&from=end`, {
        headers: { 'X-Kilolock-Actor': actor },
      });
      req.on('response', (res) => {
        if (res.statusCode === 200) {
          resolve({ status: 200, text: '', close: () => req.destroy() });
          return;
        }
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text, close: () => undefined }));
      });
      req.on('error', reject);
    });
  try {
    const alice = await subscribe('alice');
    expect(alice.status).toBe(200);
    const again = await subscribe('alice');
    expect(again.status).toBe(429);
    expect((JSON.parse(again.text) as { error: { message: string } }).error.message).toMatch(
      /^caller "alice" from (::ffff:)?127\.0\.0\.1 already has 1 event subscriptions in flight/,
    );
    const bob = await subscribe('bob');
    expect(bob.status).toBe(200);
    const get = await fetch(`${open.url}/v1/states/team/shared`, {
      headers: { Authorization: `Basic ${Buffer.from('alice:x').toString('base64')}` },
    });
    expect(get.status).toBe(200);
    alice.close();
    bob.close();
  } finally {
    await open.stop();
  }
});
