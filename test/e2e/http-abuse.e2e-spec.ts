import * as net from 'node:net';
import { KldProcess, startKld } from '../support/kld-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/**
 * A hostile or broken client at the connection level, against a real kld:
 * requests pipelined behind a HEAD of the event stream, HTTP/1.0, an Expect
 * kld cannot meet, uploads cut short mid-body. Each gets its answer (a JSON
 * error for a refusal) or is let go; kld goes on serving, and blames nothing
 * a client did on its database.
 */

jest.setTimeout(60_000);

let t: TestDatabase;
let kld: KldProcess;
let port: number;

beforeAll(async () => {
  t = await createTestDatabase('kl_http_abuse');
  kld = await startKld({ KL_DATABASE_URL: t.url });
  port = Number(new URL(kld.url).port);
});

afterAll(async () => {
  await kld?.stop();
  await t?.drop();
});

/** Commits an empty state under `name` (serial 1). */
function commitEmpty(name: string, lineage: string): Promise<Response> {
  return fetch(`${kld.url}/v1/states/${name}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({
      version: 4,
      terraform_version: '1.11.4',
      serial: 1,
      lineage,
      outputs: {},
      resources: [],
    }),
  });
}

/** Sends `bytes` on one connection and collects everything until kld closes it. */
function exchange(bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(bytes));
    let text = '';
    socket.on('data', (c: Buffer) => (text += c.toString('latin1')));
    socket.on('error', reject);
    socket.on('close', () => resolve(text));
  });
}

const statuses = (text: string) =>
  [...text.matchAll(/HTTP\/1\.[01] (\d{3}) /g)].map((m) => Number(m[1]));

const request = (method: string, path: string, extra = '') =>
  `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${extra}\r\n`;

describe('connection-level abuse', () => {
  it('answers requests pipelined behind a HEAD of the event stream, in order', async () => {
    const text = await exchange(
      request('HEAD', '/v1/events') +
        request('GET', '/v1/version') +
        request('HEAD', '/v1/events?from=end') +
        request('GET', '/healthz', 'Connection: close\r\n'),
    );
    expect(statuses(text)).toEqual([200, 200, 200, 200]);
    expect(text).toContain('{"status":"ok"}');
  });

  it('answers HTTP/1.0 and closes, and answers an unmet Expect with a JSON 417', async () => {
    const old = await exchange('GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n');
    expect(statuses(old)).toEqual([200]);
    const expectation = await exchange(
      request(
        'POST',
        '/v1/query',
        'Content-Type: application/json\r\nExpect: 200-ok\r\nContent-Length: 2\r\nConnection: close\r\n',
      ) + '{}',
    );
    expect(statuses(expectation)).toEqual([417]);
    expect(JSON.parse(expectation.split('\r\n\r\n')[1])).toEqual({
      error: {
        code: 'REQUEST.INVALID',
        message: 'Expect: 200-ok cannot be met: only Expect: 100-continue is',
      },
    });
  });

  it('refuses an event filter whose glob would take its thread for ages, and serves on', async () => {
    const name = 'a'.repeat(200);
    const created = await commitEmpty(name, 'glob');
    expect(created.status).toBe(200);
    const glob = `${'*a'.repeat(25)}*b`;
    const r = await fetch(`${kld.url}/v1/events?follow=false&state=${encodeURIComponent(glob)}`);
    expect({
      status: r.status,
      code: ((await r.json()) as { error: { code: string } }).error.code,
    }).toEqual({ status: 400, code: 'EVENTS.INVALID_FILTER' });
    expect((await fetch(`${kld.url}/healthz`)).status).toBe(200);
  });

  it('commits a state a quota glob of many wildcards misses, and serves on', async () => {
    // As a regular expression this glob took seconds per match of a long
    // name, and a quota's glob is matched on every commit of every state.
    const glob = `${'*a'.repeat(30)}*b`;
    const set = await fetch(`${kld.url}/v1/quotas`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ glob, max_resources: 10 }),
    });
    expect(set.status).toBe(200);
    const name = `quota/${'a'.repeat(300)}`;
    const committed = await commitEmpty(name, 'quota-glob');
    expect(committed.status).toBe(200);
    const usage = await fetch(`${kld.url}/v1/quotas?state=${encodeURIComponent(name)}`);
    expect(((await usage.json()) as { usage: { quota: unknown }[] }).usage[0].quota).toBeNull();
    expect((await fetch(`${kld.url}/healthz`)).status).toBe(200);
    const removed = await fetch(`${kld.url}/v1/quotas?glob=${encodeURIComponent(glob)}`, {
      method: 'DELETE',
    });
    expect(removed.status).toBe(200);
  });

  it('lets uploads cut short mid-body go without blaming the database, and serves on', async () => {
    await Promise.all(
      Array.from(
        { length: 10 },
        () =>
          new Promise<void>((resolve) => {
            const socket = net.connect(port, '127.0.0.1', () =>
              socket.write(
                request(
                  'POST',
                  '/v1/states/abuse/cut',
                  'Content-Type: application/json\r\nContent-Length: 100000\r\n',
                ) + '{"version": 4,',
              ),
            );
            socket.on('error', () => undefined);
            socket.on('close', () => resolve());
            // Gone once kld has had the start of the body.
            setTimeout(() => socket.destroy(), 200);
          }),
      ),
    );
    const after = await fetch(`${kld.url}/v1/states/abuse/cut`);
    expect(after.status).toBe(404); // nothing was stored
    expect((await fetch(`${kld.url}/readyz`)).status).toBe(200);
    // Each leaves its line, though no answer reached its client (kld's
    // output is read as it comes: waited for, up to a bound).
    const aborted = () =>
      kld
        .output()
        .split('\n')
        .filter((l) => l.includes('"msg":"request aborted"') && l.includes('/v1/states/abuse/cut'));
    for (let i = 0; i < 100 && aborted().length < 10; i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(aborted()).toHaveLength(10);
    expect(kld.output()).not.toContain('database unavailable');
    expect(kld.output()).not.toContain('unhandled error');
  });
});
