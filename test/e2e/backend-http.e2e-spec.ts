import { createHash, randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import { KldProcess, ROOT, startKld } from '../support/kld-process';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/**
 * Terraform's `http` backend protocol spoken by hand (fetch, and node:http
 * where fetch would normalise the path), against a real `kld serve`. Every
 * refusal is checked to leave the event log untouched.
 */

jest.setTimeout(60_000);

interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

interface LockInfoJson {
  ID: string;
  Operation: string;
  Info: string;
  Who: string;
  Version: string;
  Created: string;
  Path: string;
  [extra: string]: unknown;
}

let t: TestDatabase;
let kld: KldProcess;
let small: KldProcess;

beforeAll(async () => {
  t = await createTestDatabase('kl_backend_http');
  kld = await startKld({ KL_DATABASE_URL: t.url });
  small = await startKld({ KL_DATABASE_URL: t.url, KL_MAX_STATE_BYTES: '1KiB' });
});

afterAll(async () => {
  await Promise.all([kld?.stop(), small?.stop()]);
  await t?.drop();
});

const unique = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;

async function call(
  method: string,
  url: string,
  body?: string | Buffer,
  headers: Record<string, string> = {},
): Promise<Answer> {
  // Like terraform: every body is sent as JSON.
  const sent = body === undefined ? headers : { 'Content-Type': 'application/json', ...headers };
  const r = await fetch(url, { method, body, headers: sent });
  return { status: r.status, headers: r.headers, text: await r.text() };
}

const stateUrl = (name: string, base = kld.url) => `${base}/v1/states/${name}`;

/** A terraform 1.11-shaped v4 document with a couple of terraform_data instances. */
function doc(serial: number, lineage: string, tag = 'a'): Record<string, unknown> {
  return {
    version: 4,
    terraform_version: '1.11.4',
    serial,
    lineage,
    outputs: { tag: { value: tag, type: 'string' } },
    resources: [
      {
        mode: 'managed',
        type: 'terraform_data',
        name: 'x',
        provider: 'provider["terraform.io/builtin/terraform"]',
        instances: [0, 1].map((i) => ({
          index_key: i,
          schema_version: 0,
          attributes: {
            id: `id-${i}-${tag}`,
            input: { value: `${tag}-${i}`, type: 'string' },
            output: { value: `${tag}-${i}`, type: 'string' },
            triggers_replace: null,
          },
          sensitive_attributes: [],
        })),
      },
    ],
    check_results: null,
  };
}

function lockInfo(id: string = randomUUID(), extra: Record<string, unknown> = {}): LockInfoJson {
  return {
    ID: id,
    Operation: 'OperationTypeApply',
    Info: '',
    Who: 'tester@e2e',
    Version: '1.11.4',
    Created: new Date().toISOString(),
    Path: '',
    ...extra,
  };
}

const post = (name: string, body: unknown, lockId?: string, base = kld.url) =>
  call(
    'POST',
    stateUrl(name, base) + (lockId !== undefined ? `?ID=${encodeURIComponent(lockId)}` : ''),
    typeof body === 'string' ? body : JSON.stringify(body),
    { 'Content-Type': 'application/json' },
  );
const get = (name: string, serial?: number | string) =>
  call('GET', stateUrl(name) + (serial !== undefined ? `?serial=${serial}` : ''));
const lock = (name: string, info: unknown) =>
  call('LOCK', stateUrl(name), typeof info === 'string' ? info : JSON.stringify(info));
const unlock = (name: string, info?: unknown) =>
  call(
    'UNLOCK',
    stateUrl(name),
    info === undefined ? '' : typeof info === 'string' ? info : JSON.stringify(info),
  );
const del = (name: string) => call('DELETE', stateUrl(name));

/** Raw node:http request: the path goes out exactly as written (no URL normalisation). */
function raw(
  method: string,
  path: string,
  body?: Buffer | string,
  options: { chunked?: boolean; base?: string } = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> {
  const { hostname, port } = new URL(options.base ?? kld.url);
  return new Promise((resolve, reject) => {
    const req = http.request({ method, hostname, port, path, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          text: Buffer.concat(chunks).toString('utf8'),
        }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    if (body !== undefined) req.setHeader('Content-Type', 'application/json');
    if (body === undefined) {
      req.end();
    } else if (options.chunked) {
      // No Content-Length: the server can only find out the size by reading.
      const buf = Buffer.from(body);
      const step = 16 * 1024;
      for (let i = 0; i < buf.length; i += step) req.write(buf.subarray(i, i + step));
      req.end();
    } else {
      req.setHeader('Content-Length', Buffer.byteLength(body));
      req.end(body);
    }
  });
}

async function eventCount(): Promise<number> {
  const [row] = await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM kl_events');
  return row.n;
}

async function eventsOf(name: string): Promise<{ type: string; data: Record<string, unknown> }[]> {
  return t.db.query(
    `SELECT type, data FROM kl_events WHERE stream_id = $1 ORDER BY stream_revision`,
    [`state-${name}`],
  );
}

/** Versions of the live state called `name`, oldest first. */
async function versionsOf(name: string): Promise<{ version: number; serial: number }[]> {
  return t.db.query(
    `SELECT v.version, v.serial::int AS serial
       FROM state_versions v JOIN states s ON s.state_id = v.state_id
      WHERE s.name = $1 AND s.deleted_at IS NULL
      ORDER BY v.version`,
    [name],
  );
}

/** Runs `fn` and checks that it appended nothing to the event log. */
async function writesNothing<T>(fn: () => Promise<T>): Promise<T> {
  const before = await eventCount();
  const result = await fn();
  expect(await eventCount()).toBe(before);
  return result;
}

function expectJsonError(a: Answer | { status: number; text: string }, status: number): string {
  expect(a.status).toBe(status);
  const body = JSON.parse(a.text) as { error: { code: string; message: string } };
  expect(body).toEqual({ error: { code: expect.any(String), message: expect.any(String) } });
  expect(Object.keys(body)).toEqual(['error']);
  return body.error.code;
}

function expectDocument(a: Answer, expected: unknown): void {
  expect(a.status).toBe(200);
  expect(a.headers.get('content-type')).toMatch(/^application\/json/);
  expect(a.headers.get('content-md5')).toBe(createHash('md5').update(a.text).digest('base64'));
  expect(JSON.parse(a.text)).toEqual(expected);
}

describe('GET / POST', () => {
  // Terraform reads any 404 as "no state yet" and ignores its body
  // (terraform-backend.e2e-spec inits against missing names), so a 404
  // carries our JSON error like every other refusal.
  it('answers 404 with a JSON error for a state that does not exist', async () => {
    const name = unique('missing');
    for (const a of [await get(name), await get(name, 1), await get(`team/${name}/deep`)]) {
      expect(expectJsonError(a, 404)).toBe('STATE.NOT_FOUND');
    }
    expect(JSON.parse((await get(name)).text).error.message).toBe(`no state named "${name}"`);
  });

  it('keeps every accepted POST as a version and serves older ones by ?serial=', async () => {
    const name = unique('versions');
    const lineage = randomUUID();
    const docs = [doc(1, lineage, 'one'), doc(2, lineage, 'two'), doc(3, lineage, 'three')];
    const servedWhileCurrent: string[] = [];
    for (const d of docs) {
      expect((await post(name, d)).status).toBe(200);
      servedWhileCurrent.push((await get(name)).text);
    }

    expectDocument(await get(name), docs[2]);
    expectDocument(await get(name, 1), docs[0]);
    expectDocument(await get(name, 2), docs[1]);
    expectDocument(await get(name, 3), docs[2]);
    const beyond = await get(name, 999999);
    expect(expectJsonError(beyond, 404)).toBe('VERSION.NOT_FOUND');
    expect(JSON.parse(beyond.text).error.message).toBe(
      `state "${name}" has no version with serial 999999`,
    );
    // An older version reads back byte for byte as it was served while current.
    for (const [i, text] of servedWhileCurrent.entries()) {
      expect((await get(name, i + 1)).text).toBe(text);
    }

    // The same bytes again right after are terraform's client retrying a POST
    // whose answer it lost (docs/operations.md): answered, not a second version.
    expect((await post(name, docs[2])).status).toBe(200);
    expect(await versionsOf(name)).toEqual([
      { version: 1, serial: 1 },
      { version: 2, serial: 2 },
      { version: 3, serial: 3 },
    ]);
    // An earlier document again (a push of an old file) is a new version.
    expect((await post(name, docs[1])).status).toBe(200);
    expect((await versionsOf(name)).at(-1)).toEqual({ version: 4, serial: 2 });
    expectDocument(await get(name), docs[1]);

    // A serial that repeats (a forced push of an older one): ?serial= gives the newest.
    const again = doc(1, lineage, 'one-again');
    expect((await post(name, again)).status).toBe(200);
    expectDocument(await get(name), again);
    expectDocument(await get(name, 1), again);
    expectDocument(await get(name, 2), docs[1]);
    expect((await versionsOf(name)).map((v) => v.serial)).toEqual([1, 2, 3, 2, 1]);

    // ?version= names one version without ambiguity; the header says which was served.
    const byVersion = (v: number | string) => call('GET', `${stateUrl(name)}?version=${v}`);
    expectDocument(await byVersion(1), docs[0]);
    expectDocument(await byVersion(5), again);
    expect((await byVersion(1)).headers.get('x-kilolock-state-version')).toBe('1');
    expect((await get(name, 1)).headers.get('x-kilolock-state-version')).toBe('5');
    expect((await get(name)).headers.get('x-kilolock-state-version')).toBe('5');
    expect(expectJsonError(await byVersion(6), 404)).toBe('VERSION.NOT_FOUND');
    expect(expectJsonError(await byVersion('x'), 400)).toBe('REQUEST.INVALID');
    const both = await call('GET', `${stateUrl(name)}?version=1&serial=1`);
    expect(expectJsonError(both, 400)).toBe('REQUEST.INVALID');
  });

  it('gives a commit time-ordered event ids (version 7, the time of the commit)', async () => {
    // The log's unique index on event ids then grows at its right edge: a big
    // commit does not write a full-page image of every leaf of a long log.
    const name = unique('event-ids');
    const before = Date.now();
    expect((await post(name, doc(1, randomUUID()))).status).toBe(200);
    const after = Date.now();
    const rows = await t.db.query<{ event_id: string }>(
      'SELECT event_id::text FROM kl_events WHERE stream_id = $1 ORDER BY stream_revision',
      [`state-${name}`],
    );
    expect(rows.length).toBeGreaterThanOrEqual(3); // StateCreated, ApplyCommitted, the lifecycles
    for (const { event_id: id } of rows) {
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      const millis = parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
      expect(millis).toBeGreaterThanOrEqual(before);
      expect(millis).toBeLessThanOrEqual(after);
    }
  });

  it('sends Content-MD5 of exactly the bytes it serves', async () => {
    const name = unique('md5');
    const d = doc(7, randomUUID(), 'ünïcødé ✓');
    expect((await post(name, d)).status).toBe(200);
    const r = await fetch(stateUrl(name));
    const bytes = Buffer.from(await r.arrayBuffer());
    expect(r.headers.get('content-md5')).toBe(createHash('md5').update(bytes).digest('base64'));
    expect(JSON.parse(bytes.toString('utf8'))).toEqual(d);
  });

  it('refuses a bad ?serial= with a JSON 400', async () => {
    const name = unique('badserial');
    expect((await post(name, doc(1, randomUUID()))).status).toBe(200);
    for (const s of ['abc', '-1', '1.5', '']) {
      expectJsonError(await get(name, s === '' ? '' : s), 400);
    }
  });

  it.each([
    ['invalid JSON', '{"version": 4,'],
    ['an empty body', ''],
    ['a JSON array', '[]'],
    ['version 3', { ...doc(5, 'l'), version: 3 }],
    ['version as a string', { ...doc(5, 'l'), version: '4' }],
    ['no version', (({ version: _v, ...rest }) => rest)(doc(5, 'l'))],
    ['no lineage', (({ lineage: _l, ...rest }) => rest)(doc(5, 'l'))],
    ['a negative serial', { ...doc(-1, 'l') }],
    ['resources not an array', { ...doc(5, 'l'), resources: {} }],
  ])('refuses %s with a JSON 400 and writes no version', async (_what, body) => {
    const name = unique('invalid');
    const good = doc(4, randomUUID());
    expect((await post(name, good)).status).toBe(200);
    const a = await writesNothing(() => post(name, body));
    expect(expectJsonError(a, 400)).toBe('STATE.INVALID');
    expect(a.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await versionsOf(name)).toHaveLength(1);
    expectDocument(await get(name), good);
    // And a first POST that is invalid does not bring the state into being.
    const fresh = unique('invalid-fresh');
    expectJsonError(await writesNothing(() => post(fresh, body)), 400);
    expect((await get(fresh)).status).toBe(404);
  });
});

describe('values terraform writes that must survive the round trip', () => {
  // Terraform writes a NUL character in a string as "\u0000" (e.g.
  // terraform_data { input = "a\u0000b" } applies fine with the local backend).
  // jsonb refuses \u0000, so today the append fails and kld answers 500.
  it('accepts and serves back a state whose strings contain \\u0000', async () => {
    const name = unique('nul');
    const d = doc(1, randomUUID(), 'a\u0000b');
    expect(JSON.stringify(d)).toContain('\\u0000');
    const r = await post(name, d);
    expect({ status: r.status, body: r.text }).toEqual({ status: 200, body: '' });
    expectDocument(await get(name), d);
    expectDocument(await get(name, 1), d);
  });

  // Terraform numbers are arbitrary precision and its state writes them in
  // full (terraform_data { input = 9007199254740993 } is stored as that).
  // Parsed into JS doubles they come back rounded: 2^53+1 → 2^53, and
  // 123456789012345678901234567890 → 1.2345678901234568e+29.
  it('serves numbers beyond double precision back exactly as terraform wrote them', async () => {
    const name = unique('bignum');
    const text = JSON.stringify(doc(1, randomUUID(), 'n')).replace(
      '"tag":{"value":"n","type":"string"}',
      '"big":{"value":9007199254740993,"type":"number"},"huge":{"value":123456789012345678901234567890,"type":"number"}',
    );
    expect(text).toContain('9007199254740993');
    expect((await post(name, text)).status).toBe(200);
    const served = await get(name);
    expect(served.status).toBe(200);
    const numbers = served.text.match(/"value": [-0-9.e+]+/g);
    expect(numbers).toEqual([
      '"value": 9007199254740993',
      '"value": 123456789012345678901234567890',
    ]);
  });

  it('keeps a LockInfo whose strings contain \\u0000 and returns it to the next locker', async () => {
    const name = unique('nul-lock');
    const holder = lockInfo(randomUUID(), { Info: 'made by \u0000 a script' });
    const l = await lock(name, holder);
    expect({ status: l.status, body: l.text }).toEqual({ status: 200, body: '' });
    const other = await lock(name, lockInfo());
    expect(other.status).toBe(423);
    expect(JSON.parse(other.text)).toEqual(holder);
  });
});

describe('big states, one POST after another', () => {
  // kld reads a big body into the buffer of the state's body before the
  // last: each version must still be exactly the bytes sent, whatever the
  // recycled buffer held before (a longer body, other instances).
  it('stores each version exactly as sent, with the checksum of its bytes', async () => {
    const name = unique('big');
    const lineage = randomUUID();
    const pad = 'p'.repeat(400);
    const text = (serial: number, count: number, changed: number, value: string) => {
      const instances = Array.from(
        { length: count },
        (_, k) =>
          `{"index_key":${k},"schema_version":0,"attributes":{"id":"i${k}",` +
          `"v":${k === changed ? value : `"same"`},"pad":"${pad}"},"sensitive_attributes":[]}`,
      );
      return (
        `{"version":4,"terraform_version":"1.11.4","serial":${serial},"lineage":"${lineage}",` +
        `"outputs":{},"resources":[{"mode":"managed","type":"terraform_data","name":"x",` +
        `"provider":"provider[\\"terraform.io/builtin/terraform\\"]",` +
        `"instances":[${instances.join(',\n')}]}],"check_results":null}`
      );
    };
    const sent = [
      text(1, 3000, -1, '0'),
      text(2, 3000, 10, '12345678901234567890123'),
      // shorter than the first, into its buffer
      text(3, 2990, 2000, '"nul \\u0000 kept"'),
      text(4, 2990, 2000, '"nul \\u0000 kept"').replace('"id":"i5"', '"id":"i5 changed"'),
      text(5, 3001, 2999, '0.1000000000000000055511151231257827'),
    ];
    expect(Buffer.byteLength(sent[0])).toBeGreaterThan(1 << 20);
    for (const body of sent) expect((await call('POST', stateUrl(name), body)).status).toBe(200);
    const rows = await t.db.query<{ serial: number; checksum: string }>(
      `SELECT v.serial, v.checksum FROM state_versions v JOIN states s USING (state_id)
        WHERE s.name = $1 ORDER BY v.version`,
      [name],
    );
    expect(rows.map((r) => r.checksum)).toEqual(
      sent.map((b) => createHash('sha256').update(b).digest('hex')),
    );
    for (const [i, body] of sent.entries()) {
      const served = (await get(name, i + 1)).text;
      expect(JSON.parse(served)).toEqual(JSON.parse(body));
      // numbers beyond double precision, exactly as sent
      expect(served.match(/"v": [0-9.]+/g) ?? []).toEqual(
        (body.match(/"v":[0-9.]+/g) ?? []).map((m) => m.replace(':', ': ')),
      );
    }
  });
});

describe('size limits', () => {
  it('answers 413 JSON for a state over KL_MAX_STATE_BYTES and writes nothing', async () => {
    const name = unique('big');
    const fits = doc(1, randomUUID());
    expect(JSON.stringify(fits).length).toBeLessThan(1024);
    expect((await post(name, fits, undefined, small.url)).status).toBe(200);

    const big = { ...doc(2, randomUUID()), padding: 'x'.repeat(4096) };
    const a = await writesNothing(() => post(name, big, undefined, small.url));
    expect(expectJsonError(a, 413)).toBe('REQUEST.TOO_LARGE');
    expect(await versionsOf(name)).toHaveLength(1);
    // The same document is fine for a kld with the default limit.
    expect((await post(name, big)).status).toBe(200);
    expect(await versionsOf(name)).toHaveLength(2);
  });

  it('answers 413 for a chunked state over the limit (no Content-Length)', async () => {
    const name = unique('big-chunked');
    const body = JSON.stringify({ ...doc(1, randomUUID()), padding: 'z'.repeat(100_000) });
    const before = await eventCount();
    const a = await raw('POST', `/v1/states/${name}`, body, { chunked: true, base: small.url });
    expect(expectJsonError(a, 413)).toBe('REQUEST.TOO_LARGE');
    expect(await eventCount()).toBe(before);
    expect((await get(name)).status).toBe(404);
  });

  it('answers 413 JSON for a lock body over KL_MAX_LOCK_BYTES (64KiB) and takes no lock', async () => {
    const name = unique('biglock');
    expect((await post(name, doc(1, randomUUID()))).status).toBe(200);
    const huge = lockInfo(randomUUID(), { Info: 'i'.repeat(70 * 1024) });
    const a = await writesNothing(() => lock(name, huge));
    expect(expectJsonError(a, 413)).toBe('REQUEST.TOO_LARGE');
    const b = await writesNothing(() =>
      call('POST', `${kld.url}/v1/state-lock/${name}`, JSON.stringify(huge)),
    );
    expect(expectJsonError(b, 413)).toBe('REQUEST.TOO_LARGE');
    const u = await writesNothing(() => unlock(name, huge));
    expect(expectJsonError(u, 413)).toBe('REQUEST.TOO_LARGE');
    // Not locked: a normal lock goes through.
    expect((await lock(name, lockInfo())).status).toBe(200);
  });
});

describe('LOCK / UNLOCK', () => {
  it('grants one lock, answers 423 with the holder LockInfo to others, releases by ID', async () => {
    const name = unique('lock');
    const holder = lockInfo(randomUUID(), { Custom: { nested: [1, 'two'] } });
    const l = await lock(name, holder);
    expect(l.status).toBe(200);

    // A locked state that was never written still reads as missing.
    expect(expectJsonError(await get(name), 404)).toBe('VERSION.NOT_FOUND');

    for (const other of [lockInfo(), lockInfo(holder.ID)]) {
      const a = await writesNothing(() => lock(name, other));
      expect(a.status).toBe(423);
      expect(a.headers.get('content-type')).toMatch(/^application\/json/);
      expect(JSON.parse(a.text)).toEqual(holder);
    }

    // UNLOCK with someone else's ID: 409 with the holder, still locked.
    const wrong = await writesNothing(() => unlock(name, lockInfo()));
    expect(wrong.status).toBe(409);
    expect(JSON.parse(wrong.text)).toEqual(holder);
    expect((await lock(name, lockInfo())).status).toBe(423);

    const ok = await unlock(name, holder);
    expect(ok.status).toBe(200);
    // Unlocking an unlocked state succeeds and writes nothing.
    expect((await writesNothing(() => unlock(name, holder))).status).toBe(200);
    expect((await writesNothing(() => unlock(name, lockInfo()))).status).toBe(200);

    const next = lockInfo();
    expect((await lock(name, next)).status).toBe(200);
    expect((await unlock(name, next)).status).toBe(200);
    const types = (await eventsOf(name)).map((e) => e.type);
    expect(types).toEqual([
      'StateCreated',
      'LockAcquired',
      'LockReleased',
      'LockAcquired',
      'LockReleased',
    ]);
  });

  it('force-unlocks on an empty UNLOCK body (terraform force-unlock)', async () => {
    const name = unique('force');
    expect((await post(name, doc(1, randomUUID()))).status).toBe(200);
    const stuck = lockInfo();
    expect((await lock(name, stuck)).status).toBe(200);
    expect((await unlock(name)).status).toBe(200);
    const released = (await eventsOf(name)).filter((e) => e.type === 'LockReleased');
    expect(released.map((e) => e.data)).toEqual([
      expect.objectContaining({ lockId: stuck.ID, forced: true }),
    ]);
    expect((await lock(name, lockInfo())).status).toBe(200);
    // Whitespace only counts as empty too.
    expect((await unlock(name, '  \n')).status).toBe(200);
    expect((await writesNothing(() => unlock(name))).status).toBe(200);
  });

  it.each([
    ['invalid JSON', '{"ID":'],
    ['no ID', JSON.stringify({ Operation: 'x' })],
    ['an empty ID', JSON.stringify({ ID: '' })],
    ['a numeric ID', JSON.stringify({ ID: 7 })],
    ['a JSON string', JSON.stringify('id')],
  ])('refuses a LockInfo with %s (400 JSON, nothing written)', async (_what, body) => {
    const name = unique('badlock');
    expect((await post(name, doc(1, randomUUID()))).status).toBe(200);
    expectJsonError(await writesNothing(() => lock(name, body)), 400);
    expectJsonError(await writesNothing(() => lock(unique('badlock-new'), body)), 400);
    expectJsonError(
      await writesNothing(() => call('POST', `${kld.url}/v1/state-lock/${name}`, body)),
      400,
    );
    expect((await lock(name, lockInfo())).status).toBe(200);
    expectJsonError(await writesNothing(() => unlock(name, body)), 400);
  });

  it('serves the aliases POST /v1/state-lock/<name> and POST /v1/state-unlock/<name>', async () => {
    const name = unique('team/alias/net');
    const lockUrl = `${kld.url}/v1/state-lock/${name}`;
    const unlockUrl = `${kld.url}/v1/state-unlock/${name}`;
    const holder = lockInfo();
    expect((await call('POST', lockUrl, JSON.stringify(holder))).status).toBe(200);
    // The alias and the LOCK method see the same lock.
    const viaMethod = await lock(name, lockInfo());
    expect(viaMethod.status).toBe(423);
    expect(JSON.parse(viaMethod.text)).toEqual(holder);
    const viaAlias = await call('POST', lockUrl, JSON.stringify(lockInfo()));
    expect(viaAlias.status).toBe(423);
    expect(JSON.parse(viaAlias.text)).toEqual(holder);

    const wrong = await call('POST', unlockUrl, JSON.stringify(lockInfo()));
    expect(wrong.status).toBe(409);
    expect(JSON.parse(wrong.text)).toEqual(holder);

    // Commit through the lock, then release through the alias.
    const d = doc(1, randomUUID());
    expect((await post(name, d, holder.ID)).status).toBe(200);
    expect((await call('POST', unlockUrl, JSON.stringify(holder))).status).toBe(200);
    expect((await call('POST', unlockUrl, JSON.stringify(holder))).status).toBe(200);

    // Empty body on the alias = force unlock.
    expect((await lock(name, lockInfo())).status).toBe(200);
    expect((await call('POST', unlockUrl, '')).status).toBe(200);
    expect((await call('POST', lockUrl, JSON.stringify(lockInfo()))).status).toBe(200);
    expectDocument(await get(name), d);
  });
});

describe('writes under a lock', () => {
  it('accepts a POST only with the holder ID; others get the holder and nothing is written', async () => {
    const name = unique('guarded');
    const lineage = randomUUID();
    const first = doc(1, lineage, 'first');
    expect((await post(name, first)).status).toBe(200);
    const holder = lockInfo();
    expect((await lock(name, holder)).status).toBe(200);

    const noId = await writesNothing(() => post(name, doc(2, lineage, 'intruder')));
    expect(noId.status).toBe(423);
    expect(JSON.parse(noId.text)).toEqual(holder);

    const wrongId = await writesNothing(() => post(name, doc(2, lineage, 'intruder'), 'not-it'));
    expect(wrongId.status).toBe(409);
    expect(JSON.parse(wrongId.text)).toEqual(holder);

    expect(await versionsOf(name)).toHaveLength(1);
    expectDocument(await get(name), first);

    const second = doc(2, lineage, 'second');
    expect((await post(name, second, holder.ID)).status).toBe(200);
    expectDocument(await get(name), second);
    expect((await unlock(name, holder)).status).toBe(200);
    // Unlocked again: a POST without an ID is accepted (terraform -lock=false).
    const third = doc(3, lineage, 'third');
    expect((await post(name, third)).status).toBe(200);
    expect(await versionsOf(name)).toEqual([
      { version: 1, serial: 1 },
      { version: 2, serial: 2 },
      { version: 3, serial: 3 },
    ]);
  });

  it('refuses DELETE while locked, with the holder, and keeps the state', async () => {
    const name = unique('del-locked');
    const d = doc(1, randomUUID());
    expect((await post(name, d)).status).toBe(200);
    const holder = lockInfo();
    expect((await lock(name, holder)).status).toBe(200);
    const a = await writesNothing(() => del(name));
    expect(a.status).toBe(423);
    expect(JSON.parse(a.text)).toEqual(holder);
    expectDocument(await get(name), d);
    expect((await unlock(name, holder)).status).toBe(200);
  });
});

describe('DELETE', () => {
  it('deletes, then GET is 404, and the name starts a fresh history when reused', async () => {
    const name = unique('team/del/again');
    const oldLineage = randomUUID();
    for (const s of [1, 2, 3])
      expect((await post(name, doc(s, oldLineage, `old${s}`))).status).toBe(200);
    const [{ state_id: oldId }] = await t.db.query<{ state_id: string }>(
      'SELECT state_id FROM states WHERE name = $1 AND deleted_at IS NULL',
      [name],
    );

    expect((await del(name)).status).toBe(200);
    for (const a of [await get(name), await get(name, 1), await get(name, 3)]) {
      expect(expectJsonError(a, 404)).toBe('STATE.NOT_FOUND');
    }
    // Deleting again: not found, as a JSON error; nothing written.
    expect(expectJsonError(await writesNothing(() => del(name)), 404)).toBe('STATE.NOT_FOUND');

    const fresh = doc(1, randomUUID(), 'new');
    expect((await post(name, fresh)).status).toBe(200);
    expectDocument(await get(name), fresh);
    expectDocument(await get(name, 1), fresh);
    expect((await get(name, 2)).status).toBe(404);
    expect((await get(name, 3)).status).toBe(404);
    expect(await versionsOf(name)).toEqual([{ version: 1, serial: 1 }]);

    const rows = await t.db.query<{ state_id: string; deleted: boolean }>(
      'SELECT state_id, deleted_at IS NOT NULL AS deleted FROM states WHERE name = $1 ORDER BY created_at',
      [name],
    );
    expect(rows).toHaveLength(2);
    expect(rows[0]).toEqual({ state_id: oldId, deleted: true });
    expect(rows[1].state_id).not.toBe(oldId);
    expect(rows[1].deleted).toBe(false);
    // The old history is still in the database, just not under the live name.
    const [{ n }] = await t.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM state_versions WHERE state_id = $1',
      [oldId],
    );
    expect(n).toBe(3);
  });

  it('answers 404 JSON for DELETE of a state that never existed', async () => {
    expect(expectJsonError(await writesNothing(() => del(unique('never'))), 404)).toBe(
      'STATE.NOT_FOUND',
    );
  });
});

describe('state names', () => {
  it('treats names with slashes as distinct states', async () => {
    const base = unique('org');
    const names = [`${base}`, `${base}/prod`, `${base}/prod/net`, `${base}/prod/net.v2_@x+y=z`];
    const docs = names.map((_, i) => doc(i + 1, randomUUID(), `n${i}`));
    for (const [i, name] of names.entries()) expect((await post(name, docs[i])).status).toBe(200);
    for (const [i, name] of names.entries()) expectDocument(await get(name), docs[i]);
    const rows = await t.db.query<{ name: string }>(
      'SELECT name FROM states WHERE name LIKE $1 ORDER BY name',
      [`${base}%`],
    );
    expect(rows.map((r) => r.name)).toEqual([...names].sort());
  });

  it.each([
    ['a//b', 'a//b'],
    ['..', '..'],
    ['a/../b', 'a/../b'],
    ['a/./b', 'a/./b'],
    ['.hidden', '.hidden'],
    ['a/', 'a/'],
    ['-dash', '-dash'],
    ['sp%20ace', 'sp%20ace'],
    ['of 600 characters', 'x'.repeat(600)],
  ])(
    'refuses the name %s with a JSON 400 on every route, writing nothing',
    async (_label, name) => {
      const body = JSON.stringify(doc(1, randomUUID()));
      const info = JSON.stringify(lockInfo());
      const attempts: [string, string, string?][] = [
        ['GET', `/v1/states/${name}`],
        ['POST', `/v1/states/${name}`, body],
        ['DELETE', `/v1/states/${name}`],
        ['LOCK', `/v1/states/${name}`, info],
        ['UNLOCK', `/v1/states/${name}`, info],
        ['POST', `/v1/state-lock/${name}`, info],
        ['POST', `/v1/state-unlock/${name}`, info],
      ];
      for (const [method, path, b] of attempts) {
        const a = await writesNothing(() => raw(method, path, b));
        try {
          expect(expectJsonError(a, 400)).toBe('REQUEST.INVALID');
        } catch (err) {
          throw new Error(
            `${method} ${path.slice(0, 80)} → ${a.status} ${a.text.slice(0, 200)}\n${err}`,
          );
        }
      }
    },
  );
});

describe('one URL per state', () => {
  it('refuses an encoded slash (%2F) in a name on every route, so a%2Fb never names a/b', async () => {
    const base = unique('enc');
    const body = JSON.stringify(doc(1, randomUUID()));
    const info = JSON.stringify(lockInfo());
    for (const name of [`${base}%2Fb`, `${base}%2fb`, `x/${base}%2Fb/y`]) {
      const attempts: [string, string, string?][] = [
        ['GET', `/v1/states/${name}`],
        ['POST', `/v1/states/${name}`, body],
        ['DELETE', `/v1/states/${name}`],
        ['LOCK', `/v1/states/${name}`, info],
        ['UNLOCK', `/v1/states/${name}`, info],
        ['POST', `/v1/state-lock/${name}`, info],
        ['POST', `/v1/state-unlock/${name}`, info],
        ['GET', `/v1/api/states/${name}/history`],
        ['POST', `/v1/api/states/${name}/import`, body],
      ];
      for (const [method, path, b] of attempts) {
        const a = await writesNothing(() => raw(method, path, b));
        expect({ at: `${method} ${path}`, code: expectJsonError(a, 400) }).toEqual({
          at: `${method} ${path}`,
          code: 'REQUEST.INVALID',
        });
        expect(JSON.parse(a.text).error.message).toMatch(/encoded slash/);
      }
    }
    // The plain spelling is its own state, untouched by the refusals above.
    expect((await post(`${base}/b`, doc(1, randomUUID()))).status).toBe(200);
    expect(await versionsOf(`${base}/b`)).toHaveLength(1);
  });
});

describe('lineage', () => {
  it('accepts a POST of another lineage (state push -force) and records the change', async () => {
    const name = unique('lineage');
    const [first, second] = [randomUUID(), randomUUID()];
    expect((await post(name, doc(4, first))).status).toBe(200);
    expect((await post(name, doc(5, first))).status).toBe(200);
    expect((await post(name, doc(1, second, 'pushed'))).status).toBe(200);
    expectDocument(await get(name), doc(1, second, 'pushed'));
    const committed = (await eventsOf(name)).filter((e) => e.type === 'ApplyCommitted');
    expect(committed.map((e) => e.data.lineageChanged)).toEqual([
      undefined,
      undefined,
      { from: first, to: second },
    ]);
    const history = await call('GET', `${kld.url}/v1/api/states/${name}/history`);
    expect(history.status).toBe(200);
    expect(
      (JSON.parse(history.text) as { versions: { lineageChangedFrom: string | null }[] }).versions,
    ).toEqual([
      expect.objectContaining({ version: 1, lineage: first, lineageChangedFrom: null }),
      expect.objectContaining({ version: 2, lineage: first, lineageChangedFrom: null }),
      expect.objectContaining({ version: 3, lineage: second, lineageChangedFrom: first }),
    ]);
  });
});

describe('import route (POST /v1/api/states/<name>/import)', () => {
  const importUrl = (name: string, query = '') => `${kld.url}/v1/api/states/${name}/import${query}`;
  const imp = (name: string, body: unknown, query = '') =>
    call('POST', importUrl(name, query), typeof body === 'string' ? body : JSON.stringify(body), {
      'Content-Type': 'application/json',
    });

  it('keeps numbers beyond double precision exactly, like the terraform POST', async () => {
    const name = unique('imp-exact');
    const text = JSON.stringify(doc(1, randomUUID(), 'n')).replace(
      '"tag":{"value":"n","type":"string"}',
      '"big":{"value":12345678901234567890,"type":"number"},"frac":{"value":0.1000000000000000055511151231257827,"type":"number"}',
    );
    const a = await imp(name, text);
    expect({ status: a.status, body: JSON.parse(a.text) }).toEqual({
      status: 200,
      body: { state: name, version: 1 },
    });
    for (const served of [await get(name), await get(name, 1)]) {
      expect(served.text.match(/"value": [-0-9.e+]+/g)).toEqual([
        '"value": 12345678901234567890',
        '"value": 0.1000000000000000055511151231257827',
      ]);
    }
    // Checksum of the bytes as received, as for the terraform POST.
    const [row] = await t.db.query<{ checksum: string }>(
      `SELECT v.checksum FROM state_versions v JOIN states s USING (state_id) WHERE s.name = $1`,
      [name],
    );
    expect(row.checksum).toBe(createHash('sha256').update(text).digest('hex'));
  });

  it.each([
    ['invalid JSON', '{"version": 4,', /not valid JSON/],
    ['an empty body', '', /empty/],
    ['bytes that are not UTF-8', Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), /not valid UTF-8/],
    ['version 3', JSON.stringify({ ...doc(1, 'l'), version: 3 }), /version must be 4/],
  ])('refuses %s with a JSON 400 naming the problem', async (_what, body, message) => {
    const name = unique('imp-bad');
    const a = await writesNothing(() =>
      call('POST', importUrl(name), body, {
        'Content-Type': 'application/json',
      }),
    );
    expect(expectJsonError(a, 400)).toBe('STATE.INVALID');
    expect(JSON.parse(a.text).error.message).toMatch(message);
  });

  it('refuses another lineage or an older serial unless forced, writing nothing', async () => {
    const name = unique('imp-guard');
    const lineage = randomUUID();
    expect((await imp(name, doc(5, lineage))).status).toBe(200);

    const other = await writesNothing(() => imp(name, doc(9, 'someone-else')));
    expect(expectJsonError(other, 409)).toBe('STATE.LINEAGE_CONFLICT');
    expect(JSON.parse(other.text).error.message).toBe(
      `state ${name} has lineage "${lineage}", the document has lineage "someone-else"; nothing imported (kl import --force, or ?force=true, imports it anyway)`,
    );
    const older = await writesNothing(() => imp(name, doc(4, lineage)));
    expect(expectJsonError(older, 409)).toBe('STATE.SERIAL_CONFLICT');
    expect(JSON.parse(older.text).error.message).toMatch(
      /at serial 5, the document has the older serial 4/,
    );
    expectJsonError(await writesNothing(() => imp(name, doc(4, lineage), '?force=yes')), 400);
    expect(await versionsOf(name)).toEqual([{ version: 1, serial: 5 }]);

    // The same serial and newer ones continue the state; force takes anything.
    expect((await imp(name, doc(5, lineage, 'same'))).status).toBe(200);
    expect((await imp(name, doc(4, lineage, 'older'), '?force=true')).status).toBe(200);
    expect((await imp(name, doc(1, 'someone-else'), '?force=true')).status).toBe(200);
    expect(await versionsOf(name)).toEqual([
      { version: 1, serial: 5 },
      { version: 2, serial: 5 },
      { version: 3, serial: 4 },
      { version: 4, serial: 1 },
    ]);
    const last = (await eventsOf(name)).filter((e) => e.type === 'ApplyCommitted').pop()!;
    expect(last.data).toMatchObject({
      source: 'import',
      lineageChanged: { from: lineage, to: 'someone-else' },
    });
  });
});

describe('listing and history', () => {
  const listed = async () =>
    (
      JSON.parse((await call('GET', `${kld.url}/v1/api/states`)).text) as {
        states: { name: string }[];
      }
    ).states.map((s) => s.name);

  it('does not list a name that was only locked and unlocked (a probe); DELETE removes it', async () => {
    const name = unique('probe');
    const holder = lockInfo();
    expect((await lock(name, holder)).status).toBe(200);
    expect(await listed()).toContain(name);
    expect((await unlock(name, holder)).status).toBe(200);
    expect(await listed()).not.toContain(name);
    expect((await del(name)).status).toBe(200);
    expect(expectJsonError(await del(name), 404)).toBe('STATE.NOT_FOUND');
    // Written once, it is listed for good.
    expect((await post(name, doc(1, randomUUID()))).status).toBe(200);
    expect(await listed()).toContain(name);
  });

  it('keeps the history of a deleted state readable, saying when it was deleted', async () => {
    const name = unique('gone');
    for (const serial of [1, 2]) expect((await post(name, doc(serial, 'l'))).status).toBe(200);
    expect((await del(name)).status).toBe(200);
    const h = await call('GET', `${kld.url}/v1/api/states/${name}/history`);
    expect(h.status).toBe(200);
    const body = JSON.parse(h.text) as { deletedAt: string | null; versions: { serial: number }[] };
    expect(body.deletedAt).toEqual(expect.any(String));
    expect(body.versions.map((v) => v.serial)).toEqual([1, 2]);
    expect(
      expectJsonError(
        await call('GET', `${kld.url}/v1/api/states/${unique('never')}/history`),
        404,
      ),
    ).toBe('STATE.NOT_FOUND');
  });
});

describe('force-unlock route (POST /v1/api/states/<name>/force-unlock)', () => {
  const forceUnlock = (name: string, body: string) =>
    call('POST', `${kld.url}/v1/api/states/${name}/force-unlock`, body, {
      'Content-Type': 'application/json',
    });

  it('releases exactly the lock named, and refuses when another holds it', async () => {
    const name = unique('fu');
    expect((await post(name, doc(1, randomUUID()))).status).toBe(200);
    const holder = lockInfo();
    expect((await lock(name, holder)).status).toBe(200);
    const wrong = await writesNothing(() =>
      forceUnlock(name, JSON.stringify({ lock_id: 'other' })),
    );
    expect(expectJsonError(wrong, 409)).toBe('STATE.LOCK_MISMATCH');
    expectJsonError(await writesNothing(() => forceUnlock(name, '{"lock_id": 7}')), 400);
    const ok = await forceUnlock(name, JSON.stringify({ lock_id: holder.ID }));
    expect({ status: ok.status, body: JSON.parse(ok.text) }).toEqual({
      status: 200,
      body: { state: name, released: holder.ID },
    });
    const released = (await eventsOf(name)).filter((e) => e.type === 'LockReleased');
    expect(released.map((e) => e.data)).toEqual([
      expect.objectContaining({ lockId: holder.ID, forced: true }),
    ]);
    // Nothing held: nothing released, still a success.
    expect(JSON.parse((await forceUnlock(name, '')).text)).toEqual({ state: name, released: null });
  });
});

describe('server version', () => {
  it('answers GET /v1/version with the version of kld', async () => {
    const a = await call('GET', `${kld.url}/v1/version`);
    expect(a.status).toBe(200);
    const { version } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
      version: string;
    };
    expect(JSON.parse(a.text)).toEqual({ version });
  });
});
