import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { bootstrapToken } from '../support/auth';
import { RECHECK_MS } from '../../src/infrastructure/auth/subscriber-recheck';
import {
  bearer,
  collectGrpc,
  grpcEventsClient,
  GrpcMessage,
  unbatched,
} from '../support/event-clients';
import { freePort } from '../../src/infrastructure/postgres/embedded-postgres';
import { KL, KldProcess, startKld } from '../support/kld-process';
import { makeTestCertificates } from '../support/test-certificates';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/**
 * The event feed with authentication on: the `events` scope lets a token
 * subscribe, and it gets only the events of the states it may read (events
 * of no state, tokens', to admins only), over SSE, gRPC and `kl events`;
 * gRPC takes the token from call metadata and serves TLS and mTLS with
 * KL_TLS_*.
 */

jest.setTimeout(240_000);

let root: string;
let t: TestDatabase;
let plain: KldProcess;
let mtls: KldProcess;
let pem: Record<string, string>;
const tokens: Record<string, string> = {};

interface FeedEvent {
  position: string;
  stream: string;
  type: string;
  eventId: string;
}

const doc = (serial: number) =>
  JSON.stringify({
    version: 4,
    terraform_version: '1.11.4',
    serial,
    lineage: 'lineage-1',
    outputs: {},
    resources: [],
  });

async function post(state: string, serial: number): Promise<void> {
  const r = await fetch(`${plain.url}/v1/states/${state}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${tokens.root}` },
    body: doc(serial),
  });
  expect(r.status).toBe(200);
}

/** `GET /v1/events?follow=false` as `token` sees it: status, events and markers. */
async function sse(token: string | null, query = '') {
  const r = await fetch(`${plain.url}/v1/events?follow=false${query}`, {
    headers: token === null ? {} : { Authorization: `Bearer ${token}` },
  });
  const text = await r.text();
  if (r.status !== 200) return { status: r.status, text, events: [], markers: [] };
  const frames = text.split('\n\n').filter((f) => f.includes('data: '));
  const events: FeedEvent[] = [];
  const markers: string[] = [];
  for (const f of frames) {
    const data = /^data: (.*)$/m.exec(f)![1];
    const kind = /^event: (.*)$/m.exec(f)?.[1];
    if (kind === undefined) events.push(JSON.parse(data) as FeedEvent);
    else markers.push(`${kind} ${data}`);
  }
  return { status: r.status, text, events, markers };
}

/** The gRPC error of a call that must be refused, as `CODE details`. */
async function refusal(call: grpc.ClientReadableStream<Record<string, unknown>>) {
  const err = await collectGrpc(call).done.then(
    () => null,
    (e: grpc.ServiceError) => e,
  );
  return err && `${grpc.status[err.code]} ${err.details}`;
}

const streams = (events: { stream?: string; stream_id?: string | number }[]) => [
  ...new Set(events.map((e) => String(e.stream ?? e.stream_id))),
];

async function waitFor(what: string, ok: () => boolean, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

beforeAll(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-events-auth-'));
  pem = makeTestCertificates(root);
  t = await createTestDatabase('kl_events_auth');
  const boot = bootstrapToken(t.url, 'root', ['admin', 'write:*']);
  expect(boot.code).toBe(0);
  tokens.root = boot.secret;
  const server = { KL_DATABASE_URL: t.url, KL_AUTH: 'on' };
  [plain, mtls] = await Promise.all([
    startKld(server, 90_000),
    startKld(
      {
        ...server,
        KL_TLS_CERT: path.join(root, 'server.pem'),
        KL_TLS_KEY: path.join(root, 'server.key'),
        KL_TLS_CLIENT_CA: path.join(root, 'ca.pem'),
      },
      90_000,
      { tls: { ca: pem['ca.pem'], cert: pem['client.pem'], key: pem['client.key'] } },
    ),
  ]);
  const create = async (name: string, scopes: string[], certSubject?: string) => {
    const r = await fetch(`${plain.url}/v1/admin/tokens`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${tokens.root}` },
      body: JSON.stringify({ name, scopes, ...(certSubject ? { cert_subject: certSubject } : {}) }),
    });
    expect(r.status).toBe(201);
    tokens[name] = ((await r.json()) as { token: string | null }).token ?? '';
  };
  await create('feed-a', ['events', 'read:team-a/*']);
  await create('feed-admin', ['events', 'admin', 'read:*']);
  await create('reader', ['read:*']);
  await create('feed-cert', ['events', 'read:team-b/*'], 'CN=ci-runner, O=acme');
  for (const serial of [1, 2]) {
    await post('team-a/x', serial);
    await post('team-b/y', serial);
  }
});

afterAll(async () => {
  await Promise.all([plain?.stop(), mtls?.stop()]);
  await t?.drop();
  if (root) fs.rmSync(root, { recursive: true, force: true });
});

it('SSE gives a token the events of the states it may read; tokens only to admins', async () => {
  const admin = await sse(tokens['feed-admin']);
  expect(admin.status).toBe(200);
  expect(streams(admin.events).sort()).toEqual(
    [
      'state-team-a/x',
      'state-team-b/y',
      'token-feed-a',
      'token-feed-admin',
      'token-feed-cert',
      'token-reader',
      'token-root',
    ].sort(),
  );
  const a = await sse(tokens['feed-a']);
  expect(a.status).toBe(200);
  expect(streams(a.events)).toEqual(['state-team-a/x']);
  expect(a.events.map((e) => e.eventId)).toEqual(
    admin.events.filter((e) => e.stream === 'state-team-a/x').map((e) => e.eventId),
  );
  // The stream ends at the log's head, past the events it did not show, and
  // nothing in it names them.
  expect(a.markers.at(-1)).toBe(
    `caught-up ${JSON.stringify({ position: admin.events.at(-1)!.position })}`,
  );
  expect(a.text).not.toMatch(/team-b|feed-admin|TokenCreated/);
  // Its own filters narrow further, never widen.
  expect(streams((await sse(tokens['feed-a'], '&state=team-b/*')).events)).toEqual([]);
  expect(streams((await sse(tokens['feed-a'], '&type=TokenCreated')).events)).toEqual([]);

  expect((await sse(null)).status).toBe(401);
  const reader = await sse(tokens.reader);
  expect(reader.status).toBe(403);
  expect(JSON.parse(reader.text).error.message).toMatch(/needs the events scope/);
});

it('an archive export is one state’s history, for tokens that may read that state', async () => {
  const get = (state: string) =>
    fetch(`${plain.url}/v1/archives/${state}`, {
      headers: { Authorization: `Bearer ${tokens['feed-a']}` },
    });
  const own = await get('team-a/x');
  expect(own.status).toBe(200);
  const lines = (await own.text()).trim().split('\n').slice(1);
  expect(new Set(lines.map((l) => (JSON.parse(l) as { type: string }).type))).toEqual(
    new Set(['StateCreated', 'ApplyCommitted']),
  );
  const other = await get('team-b/y');
  expect(other.status).toBe(403);
  expect(((await other.json()) as { error: { code: string } }).error.code).toBe('AUTH.FORBIDDEN');
});

it('gRPC takes the token from call metadata: UNAUTHENTICATED without one, PERMISSION_DENIED without the scope', async () => {
  const rpc = grpcEventsClient(plain.grpc);
  try {
    expect(await refusal(rpc.Read({ origin: 'ORIGIN_START' }))).toMatch(
      /^UNAUTHENTICATED AUTH.UNAUTHENTICATED: authentication required: send a token as "Authorization: Bearer <token>"/,
    );
    expect(await refusal(rpc.Read({}, bearer('kl_not-a-token')))).toMatch(
      /^UNAUTHENTICATED AUTH.UNAUTHENTICATED: the token is not valid/,
    );
    expect(await refusal(rpc.Subscribe({}, bearer(tokens.reader)))).toMatch(
      /^PERMISSION_DENIED AUTH.FORBIDDEN: kilolock.v1.Events\/Subscribe needs the events scope; token "reader" has read:\*/,
    );

    const all = collectGrpc(rpc.Read({}, bearer(tokens['feed-admin'])));
    const a = collectGrpc(rpc.Read({}, bearer(tokens['feed-a'])));
    await Promise.all([all.done, a.done]);
    const events = (ms: GrpcMessage[]) => ms.filter((m) => m.kind === 'event').map((m) => m.event!);
    expect(streams(events(all.messages))).toContain('token-feed-a');
    expect(streams(events(a.messages))).toEqual(['state-team-a/x']);
    // The same events SSE gives this token.
    expect(events(a.messages).map((e) => e.event_id)).toEqual(
      (await sse(tokens['feed-a'])).events.map((e) => e.eventId),
    );
    // Batched (max_batch), the same refusals and the same events.
    expect(await refusal(rpc.Read({ max_batch: 10 }))).toMatch(/^UNAUTHENTICATED /);
    expect(await refusal(rpc.Subscribe({ max_batch: 10 }, bearer(tokens.reader)))).toMatch(
      /^PERMISSION_DENIED AUTH.FORBIDDEN: /,
    );
    const aBatched = collectGrpc(rpc.Read({ max_batch: 10 }, bearer(tokens['feed-a'])));
    await aBatched.done;
    expect(aBatched.messages.some((m) => m.kind === 'batch')).toBe(true);
    expect(unbatched(aBatched.messages)).toEqual(a.messages);
  } finally {
    rpc.close();
  }
});

it('a live subscriber gets checkpoints, not events, for states it may not read', async () => {
  const rpc = grpcEventsClient(plain.grpc);
  try {
    const sub = collectGrpc(
      rpc.Subscribe(
        { origin: 'ORIGIN_END', checkpoint_interval_ms: 100 },
        bearer(tokens['feed-a']),
      ),
    );
    await waitFor('caught up', () => sub.messages.some((m) => m.kind === 'caught_up'));
    await post('team-b/y', 3);
    const head = (await sse(tokens['feed-admin'])).events.at(-1)!;
    expect(head.stream).toBe('state-team-b/y');
    await waitFor('a checkpoint at team-b/y’s last event', () =>
      sub.messages.some((m) => m.kind === 'checkpoint' && m.position === head.position),
    );
    await post('team-a/x', 3);
    await waitFor('team-a/x’s version', () => sub.messages.some((m) => m.kind === 'event'));
    await sub.stop();
    expect(sub.messages.filter((m) => m.kind === 'event').map((m) => m.event!.stream_id)).toEqual([
      'state-team-a/x', // ApplyCommitted
    ]);
    // A checkpoint is a position and nothing else.
    for (const m of sub.messages.filter((m) => m.kind === 'checkpoint')) {
      expect(Object.keys(m)).toEqual(['kind', 'position']);
    }
  } finally {
    rpc.close();
  }
});

it('ends an open subscription once its token is revoked: gRPC UNAUTHENTICATED, SSE an error, no event after', async () => {
  const r = await fetch(`${plain.url}/v1/admin/tokens`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${tokens.root}` },
    body: JSON.stringify({ name: 'feed-revoked', scopes: ['events', 'read:team-a/*'] }),
  });
  expect(r.status).toBe(201);
  const token = ((await r.json()) as { token: string }).token;
  const rpc = grpcEventsClient(plain.grpc);
  const abort = new AbortController();
  try {
    const sub = collectGrpc(rpc.Subscribe({ origin: 'ORIGIN_END' }, bearer(token)));
    let outcome: string | null = null;
    void sub.done.then(
      () => (outcome = 'ended without an error'),
      (e: grpc.ServiceError) => (outcome = `${grpc.status[e.code]} ${e.details}`),
    );
    const stream = await fetch(`${plain.url}/v1/events?from=end`, {
      headers: { Authorization: `Bearer ${token}` },
      signal: abort.signal,
    });
    expect(stream.status).toBe(200);
    let text = '';
    void (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of stream.body as AsyncIterable<Uint8Array>) {
        text += decoder.decode(chunk, { stream: true });
      }
    })().catch(() => undefined);
    await waitFor(
      'caught up',
      () => sub.messages.some((m) => m.kind === 'caught_up') && text.includes('event: caught-up'),
    );
    const revoke = await fetch(`${plain.url}/v1/admin/tokens/feed-revoked`, {
      method: 'DELETE',
      headers: { Authorization: `Bearer ${tokens.root}` },
    });
    expect(revoke.status).toBe(200);
    // Past the recheck interval, so the next message asks again.
    await new Promise((resolve) => setTimeout(resolve, RECHECK_MS + 200));
    await post('team-a/x', 4);
    await waitFor(
      'the gRPC stream to end, or to deliver the event',
      () => outcome !== null || sub.messages.some((m) => m.kind === 'event'),
    );
    expect(sub.messages.filter((m) => m.kind === 'event')).toEqual([]);
    expect(outcome).toMatch(
      /^UNAUTHENTICATED AUTH.UNAUTHENTICATED: token "feed-revoked" was revoked/,
    );
    await waitFor(
      'the SSE stream to end, or to deliver the event',
      () => text.includes('event: error') || text.includes('state-team-a/x'),
    );
    expect(text).toMatch(/event: error\ndata: \{"code":"AUTH.UNAUTHENTICATED"/);
    expect(text).not.toContain('state-team-a/x');
  } finally {
    abort.abort();
    rpc.close();
  }
});

it('kl events presents KL_TOKEN and prints only readable states', () => {
  const r = spawnSync(process.execPath, [KL, 'events', '--format', 'json'], {
    encoding: 'utf8',
    env: { ...process.env, KL_SERVER_URL: plain.url, KL_TOKEN: tokens['feed-a'] },
    timeout: 60_000,
  });
  expect(r.stderr).toBe('');
  expect(r.status).toBe(0);
  const printed = r.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as FeedEvent);
  expect(printed.length).toBeGreaterThan(0);
  expect(streams(printed)).toEqual(['state-team-a/x']);
});

it('gRPC serves TLS with KL_TLS_*, and with a client CA the certificate is the identity', async () => {
  const trusted = (name: string | null) =>
    grpc.credentials.createSsl(
      Buffer.from(pem['ca.pem']),
      name === null ? null : Buffer.from(pem[`${name}.key`]),
      name === null ? null : Buffer.from(pem[`${name}.pem`]),
    );
  // The certificate names feed-cert: events of team-b only, no token needed.
  const rpc = grpcEventsClient(mtls.grpc, trusted('client'));
  try {
    const read = collectGrpc(rpc.Read({}));
    await read.done;
    const events = read.messages.filter((m) => m.kind === 'event').map((m) => m.event!);
    expect(events.length).toBeGreaterThan(0);
    expect(streams(events)).toEqual(['state-team-b/y']);
    // A token sent along is the identity instead.
    const withToken = collectGrpc(rpc.Read({}, bearer(tokens['feed-a'])));
    await withToken.done;
    expect(
      streams(withToken.messages.filter((m) => m.kind === 'event').map((m) => m.event!)),
    ).toEqual(['state-team-a/x']);
  } finally {
    rpc.close();
  }

  // A certificate of the CA that names no identity, and no token.
  const stranger = grpcEventsClient(mtls.grpc, trusted('stranger'));
  expect(await refusal(stranger.Read({}))).toMatch(
    /^UNAUTHENTICATED AUTH.UNAUTHENTICATED: no identity is registered for client certificate "CN=stranger"/,
  );
  stranger.close();
  // No client certificate, another CA's, or no TLS at all: no connection.
  for (const credentials of [
    trusted(null),
    grpc.credentials.createSsl(
      Buffer.from(pem['ca.pem']),
      Buffer.from(pem['rogue.key']),
      Buffer.from(pem['rogue.pem']),
    ),
    grpc.credentials.createInsecure(),
  ]) {
    const client = grpcEventsClient(mtls.grpc, credentials);
    expect(await refusal(client.Read({}, bearer(tokens['feed-admin'])))).toMatch(/^UNAVAILABLE /);
    client.close();
  }
});

it('refuses to serve plaintext gRPC off loopback with authentication on', async () => {
  const port = await freePort();
  await expect(
    startKld({ KL_DATABASE_URL: t.url, KL_AUTH: 'on', KL_GRPC_LISTEN: `0.0.0.0:${port}` }, 60_000),
  ).rejects.toThrow(
    /KL_GRPC_LISTEN: 0\.0\.0\.0 is not loopback and gRPC would carry tokens in clear; set KL_TLS_CERT and KL_TLS_KEY/,
  );
});
