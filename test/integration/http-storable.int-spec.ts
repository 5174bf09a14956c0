import { randomBytes, randomUUID } from 'node:crypto';
import * as http from 'node:http';
import { startServer, KldServer } from '../../src/app/server';
import { initialState, StateCommand, stateDecider } from '../../src/domain/state';
import { loadConfig } from '../../src/infrastructure/config/config';
import { EVENT_SCHEMA_VERSION } from '../../src/domain/shared/event';
import { flattenInstances } from '../../src/domain/terraform';
import { Notifier } from '../../src/infrastructure/postgres/notifier';
import { PostgresEventStore } from '../../src/infrastructure/event-store/postgres-event-store';
import { createTestDatabase, quietLogger, TestDatabase } from '../support/test-database';
import { testDocument } from '../support/state-harness';

/**
 * Every field that reaches a column is either refused at the HTTP boundary
 * with a 400 naming it (and nothing is stored), or stored exactly and
 * projected; and a write whose read models cannot follow answers 503
 * SERVER.LAGGING, never 500, with retries that change nothing.
 */

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  json?: { error?: { code: string; message: string } } & Record<string, unknown>;
}

let t: TestDatabase;
let server: KldServer;

beforeAll(async () => {
  t = await createTestDatabase('kl_storable');
  server = await startServer(
    loadConfig({ KL_DATABASE_URL: t.url, KL_LISTEN: '127.0.0.1:0', KL_GRPC_LISTEN: 'off' }),
    quietLogger,
  );
});

afterAll(async () => {
  await server?.close();
  await t?.drop();
});

/** Raw bytes out, exactly (node:http, so invalid UTF-8 and odd methods go as they are). */
function send(
  method: string,
  path: string,
  body?: Buffer | string,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const { hostname, port } = new URL(server.url);
  // Every body kld takes is JSON, and says so, as terraform's do.
  const sent = body === undefined ? headers : { 'Content-Type': 'application/json', ...headers };
  return new Promise((resolve, reject) => {
    const req = http.request(
      { method, hostname, port, path, headers: sent, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: Answer['json'];
          try {
            json = text ? JSON.parse(text) : undefined;
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const eventCount = async () =>
  (await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM kl_events'))[0].n;

function lockBody(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    ID: randomUUID(),
    Operation: 'OperationTypeApply',
    Info: '',
    Who: 'alice@laptop',
    Version: '1.11.4',
    Created: new Date().toISOString(),
    Path: '',
    ...extra,
  };
}

function stateBody(mutate: (doc: Record<string, unknown>) => void = () => undefined) {
  const doc = testDocument(1, [{ name: 'a', input: 'x', key: 'k' }], {
    out: { value: 'v', type: 'string' },
  }) as unknown as Record<string, unknown>;
  mutate(doc);
  return doc;
}

const instanceOf = (doc: Record<string, unknown>) =>
  (doc.resources as { instances: Record<string, unknown>[] }[])[0].instances[0];
const resourceOf = (doc: Record<string, unknown>) =>
  (doc.resources as Record<string, unknown>[])[0];

/** Replaces the JSON string "<name>" by raw text (numbers, nesting, escapes). */
const raw = (json: unknown, name: string, text: string) =>
  JSON.stringify(json).replace(`"<${name}>"`, text);

describe('refused at the boundary, naming the field, storing nothing', () => {
  beforeAll(async () => {
    // Provider configs belong to an existing state.
    expect((await send('POST', '/v1/states/f/pc', JSON.stringify(stateBody()))).status).toBe(200);
  });

  const deep = '['.repeat(10_000) + ']'.repeat(10_000);
  const cases: [string, () => Promise<Answer>, string][] = [
    [
      'lock info Who with a NUL',
      () =>
        send('LOCK', '/v1/states/f/lock-who', JSON.stringify(lockBody({ Who: 'evil\u0000who' }))),
      'lock info Who holds a NUL character',
    ],
    [
      'lock info ID with a NUL (POST alias)',
      () => send('POST', '/v1/state-lock/f/lock-id', JSON.stringify(lockBody({ ID: 'L\u0000' }))),
      'lock info ID holds a NUL character',
    ],
    [
      'lock info Operation with a NUL',
      () =>
        send('LOCK', '/v1/states/f/lock-op', JSON.stringify(lockBody({ Operation: 'a\u0000' }))),
      'lock info Operation holds a NUL character',
    ],
    [
      'lock info with a lone surrogate',
      () => send('LOCK', '/v1/states/f/lock-sur', raw(lockBody({ Info: '<x>' }), 'x', '"\\ud800"')),
      'lock info Info holds an unpaired UTF-16 surrogate',
    ],
    [
      'lock info with an invalid UTF-8 byte',
      () =>
        send(
          'LOCK',
          '/v1/states/f/lock-utf8',
          Buffer.concat([
            Buffer.from('{"ID":"L1","Who":"a'),
            Buffer.from([0xc3, 0x28]),
            Buffer.from('"}'),
          ]),
        ),
      'lock info is not valid UTF-8 (bad byte at offset 19)',
    ],
    [
      'lock info nested 10,000 levels',
      () => send('LOCK', '/v1/states/f/lock-deep', raw(lockBody({ Info: '<x>' }), 'x', deep)),
      'lock info nests deeper than 1000 levels',
    ],
    [
      'lock info with 1e400',
      () => send('LOCK', '/v1/states/f/lock-num', raw(lockBody({ N: '<x>' }), 'x', '1e400')),
      'lock info N is not plain JSON',
    ],
    [
      'unlock info Who with a NUL',
      () => send('UNLOCK', '/v1/states/f/unlock', JSON.stringify(lockBody({ Who: 'evil\u0000' }))),
      'lock info Who holds a NUL character',
    ],
    [
      'state lineage with a NUL',
      () =>
        send(
          'POST',
          '/v1/states/f/lineage',
          JSON.stringify(stateBody((d) => (d.lineage = 'l\u0000'))),
        ),
      'lineage holds a NUL character',
    ],
    [
      'state lineage with invalid UTF-8',
      () =>
        send(
          'POST',
          '/v1/states/f/lineage-utf8',
          Buffer.from(
            JSON.stringify(stateBody((d) => (d.lineage = 'LINEAGE'))).replace(
              'LINEAGE',
              '\u00ff\u00fe',
            ),
            'latin1',
          ),
        ),
      'state is not valid UTF-8',
    ],
    [
      'state terraform_version with a NUL',
      () =>
        send(
          'POST',
          '/v1/states/f/tfv',
          JSON.stringify(stateBody((d) => (d.terraform_version = '1\u0000'))),
        ),
      'terraform_version holds a NUL character',
    ],
    [
      'state resource name with a NUL',
      () =>
        send(
          'POST',
          '/v1/states/f/name',
          JSON.stringify(stateBody((d) => (resourceOf(d).name = 'a\u0000'))),
        ),
      'resources[0].name holds a NUL character',
    ],
    [
      'state provider with a NUL',
      () =>
        send(
          'POST',
          '/v1/states/f/provider',
          JSON.stringify(stateBody((d) => (resourceOf(d).provider = 'p\u0000'))),
        ),
      'resources[0].provider holds a NUL character',
    ],
    [
      'state dependency with a NUL',
      () =>
        send(
          'POST',
          '/v1/states/f/deps',
          JSON.stringify(stateBody((d) => (instanceOf(d).dependencies = ['x.y\u0000']))),
        ),
      'resources[0].instances[0].dependencies[0] holds a NUL character',
    ],
    [
      'state output name with a NUL',
      () =>
        send(
          'POST',
          '/v1/states/f/outname',
          JSON.stringify(stateBody((d) => (d.outputs = { 'o\u0000': { value: 1 } }))),
        ),
      'outputs["o\\u0000"] holds a NUL character',
    ],
    [
      'state schema_version of 2^31',
      () =>
        send(
          'POST',
          '/v1/states/f/schema',
          JSON.stringify(stateBody((d) => (instanceOf(d).schema_version = 2 ** 31))),
        ),
      'resources[0].instances[0].schema_version must be at most 2147483647',
    ],
    [
      'state with an address over the index limit',
      () =>
        send(
          'POST',
          '/v1/states/f/address',
          JSON.stringify(
            stateBody((d) => (instanceOf(d).index_key = randomBytes(600).toString('hex'))),
          ),
        ),
      'resources[0].instances[0] has an address longer than 800 bytes',
    ],
    [
      'state with 1e200000 in an attribute',
      () =>
        send(
          'POST',
          '/v1/states/f/bignum',
          raw(
            stateBody((d) => (instanceOf(d).attributes = { n: '<x>' })),
            'x',
            '1e200000',
          ),
        ),
      'resources[0].instances[0].attributes.n is a number PostgreSQL cannot store',
    ],
    [
      'state with a lone surrogate in an attribute',
      () =>
        send(
          'POST',
          '/v1/states/f/surrogate',
          raw(
            stateBody((d) => (instanceOf(d).attributes = { s: '<x>' })),
            'x',
            '"\\udc00"',
          ),
        ),
      'resources[0].instances[0].attributes.s holds an unpaired UTF-16 surrogate',
    ],
    [
      'state nested 10,000 levels',
      () =>
        send(
          'POST',
          '/v1/states/f/deep',
          raw(
            stateBody((d) => (instanceOf(d).attributes = { s: '<x>' })),
            'x',
            deep,
          ),
        ),
      'state nests deeper than 1000 levels',
    ],
    [
      'state with ?ID= given twice',
      () => send('POST', '/v1/states/f/twice?ID=a&ID=b', JSON.stringify(stateBody())),
      'ID must be given once',
    ],
    [
      'kl import with a NUL lineage',
      () =>
        send(
          'POST',
          '/v1/api/states/f/import/import',
          JSON.stringify(stateBody((d) => (d.lineage = '\u0000'))),
        ),
      'lineage holds a NUL character',
    ],
    [
      'a basic auth username with a NUL (the actor)',
      () =>
        send('POST', '/v1/states/f/actor', JSON.stringify(stateBody()), {
          Authorization: `Basic ${Buffer.from('ev\u0000il:pw').toString('base64')}`,
        }),
      'the basic auth username holds a NUL character',
    ],
    [
      'a provider config alias over the index limit',
      () =>
        send(
          'PUT',
          '/v1/provider-configs',
          JSON.stringify({
            state: 'f/pc',
            source: 'hashicorp/aws',
            alias: `a${'b'.repeat(600)}`,
            config: {},
          }),
        ),
      'alias is longer than 512 bytes',
    ],
    [
      'a provider config with a lone surrogate',
      () =>
        send(
          'PUT',
          '/v1/provider-configs',
          raw(
            { state: 'f/pc', source: 'hashicorp/aws', config: { region: '<x>' } },
            'x',
            '"\\ud800"',
          ),
        ),
      'provider config config.region holds an unpaired UTF-16 surrogate',
    ],
    [
      'a provider config alias with a NUL (looked up before it is stored)',
      () =>
        send(
          'PUT',
          '/v1/provider-configs',
          JSON.stringify({ state: 'f/pc', source: 'hashicorp/aws', alias: 'a\u0000', config: {} }),
        ),
      'alias holds a NUL character',
    ],
    [
      'a provider schema whose source is over the index limit',
      () =>
        send(
          'PUT',
          '/v1/provider-schemas',
          JSON.stringify({
            source: `hashicorp/${randomBytes(600).toString('hex')}`,
            version: '1.0.0',
            schema: { provider: {} },
          }),
        ),
      'source is longer than 512 bytes',
    ],
    [
      'a NUL in a URL (a read that took it to PostgreSQL)',
      () => send('GET', '/v1/api/states/f/pc/resources/a%00b'),
      'the request URL holds a NUL character (%00)',
    ],
    [
      'a query with a NUL',
      () => send('POST', '/v1/query', JSON.stringify({ sql: 'SELECT 1\u0000' })),
      'sql holds a NUL character',
    ],
  ];

  it.each(cases)('%s', async (_name, request, message) => {
    const before = await eventCount();
    const r = await request();
    expect({ status: r.status, code: r.json?.error?.code }).toEqual({
      status: 400,
      code: expect.stringMatching(/^(STATE|REQUEST|PROVIDER_CONFIG)\.INVALID$/),
    });
    expect(r.json?.error?.message).toContain(message);
    expect(await eventCount()).toBe(before);
  });

  it('refuses refresh results whose address or hash could not be stored', async () => {
    const doc = stateBody();
    expect((await send('POST', '/v1/states/f/refreshed', JSON.stringify(doc))).status).toBe(200);
    const started = await send(
      'POST',
      '/v1/refresh-runs',
      JSON.stringify({ state: 'f/refreshed' }),
    );
    expect(started.status).toBe(201);
    const runId = started.json!.run_id as string;
    const result = (extra: Record<string, unknown>) => ({
      address: 'terraform_data.a["k"]',
      provider: 'provider["terraform.io/builtin/terraform"]',
      outcome: 'unchanged',
      before_hash: 'h',
      after_hash: 'h',
      ...extra,
    });
    const before = await eventCount();
    for (const [extra, message] of [
      [{ address: 'a\u0000' }, 'results[0].address holds a NUL character'],
      [{ address: 'x'.repeat(801) }, 'results[0].address is longer than 800 bytes'],
      [{ before_hash: '\u0000' }, 'results[0].before_hash holds a NUL character'],
    ] as const) {
      const r = await send(
        'POST',
        `/v1/refresh-runs/${runId}/results`,
        JSON.stringify({ results: [result(extra)] }),
      );
      expect({ status: r.status, message: r.json?.error?.message }).toEqual({
        status: 400,
        message,
      });
    }
    expect(await eventCount()).toBe(before);
    // An error text is free-form: kept exactly, projected NUL-safe.
    const ok = await send(
      'POST',
      `/v1/refresh-runs/${runId}/results`,
      JSON.stringify({ results: [result({ outcome: 'failed', error: 'provider said \u0000' })] }),
    );
    expect(ok.status).toBe(200);
    expect(
      await t.db.query('SELECT error FROM refresh_results WHERE run_id = $1', [runId]),
    ).toEqual([{ error: 'provider said \uFFFD' }]);
  });

  it('answers headers too large for Node with a JSON 431', async () => {
    const r = await send('GET', `/v1/provider-configs?state=f/pc&alias=${'a'.repeat(100_000)}`);
    expect({ status: r.status, body: r.json }).toEqual({
      status: 431,
      body: {
        error: { code: 'REQUEST.TOO_LARGE', message: 'request headers (or URL) are too large' },
      },
    });
  });

  it('stays ready: nothing it refused reached a projector', async () => {
    const r = await send('GET', '/readyz');
    expect(r.status).toBe(200);
  });
});

describe('a write the read models cannot follow (a halted projector)', () => {
  let poisonPosition: number;
  const name = 'lagging/x';
  const doc = JSON.stringify(stateBody());
  const lock = JSON.stringify(lockBody());

  beforeAll(async () => {
    // An event an older version accepted: a resource name no index can hold.
    const events = new PostgresEventStore(t.db, new Notifier(t.url));
    const document = testDocument(1, [
      { name: `n${randomBytes(4000).toString('hex')}`, input: 'x' },
    ]);
    const command: StateCommand = {
      type: 'CommitState',
      data: {
        name: 'poisoned',
        newStateId: randomUUID(),
        document,
        instances: flattenInstances(document),
        source: 'http',
        checksum: 'c',
      },
      metadata: { actor: 'old', correlationId: 'c', now: new Date().toISOString() },
    };
    const decided = stateDecider.decide(command, initialState());
    const metadata = {
      actor: 'old',
      correlationId: 'c',
      causationId: null,
      occurredAt: command.metadata.now,
    };
    const appended = await events.appendToStream(
      'state-poisoned',
      decided.map((e) => ({
        eventId: randomUUID(),
        type: e.type,
        schemaVersion: EVENT_SCHEMA_VERSION,
        data: e.data,
        metadata,
      })),
      { expectedRevision: 'no_stream' },
    );
    poisonPosition = Number(appended.position.globalPosition);
  });

  it('answers 503 SERVER.LAGGING saying what was stored, never 500', async () => {
    const before = await eventCount();
    const posted = await send('POST', `/v1/states/${name}`, doc);
    expect({ status: posted.status, body: posted.json }).toEqual({
      status: 503,
      body: {
        error: {
          code: 'SERVER.LAGGING',
          message: `written as version 1 of state ${name}; read models catching up`,
        },
      },
    });
    expect(posted.headers['retry-after']).toBe('1');
    // Terraform's client retries a 503 with the same body: no second version.
    expect((await send('POST', `/v1/states/${name}`, doc)).json?.error?.code).toBe(
      'SERVER.LAGGING',
    );
    const locked = await send('LOCK', `/v1/states/${name}`, lock);
    expect({ status: locked.status, body: locked.json }).toEqual({
      status: 503,
      body: {
        error: {
          code: 'SERVER.LAGGING',
          message: `lock ${JSON.parse(lock).ID} acquired on state ${name}; read models catching up`,
        },
      },
    });
    expect((await send('LOCK', `/v1/states/${name}`, lock)).json?.error?.code).toBe(
      'SERVER.LAGGING',
    );
    // Stored once each: StateCreated, ApplyCommitted, LifecycleOpened, LockAcquired.
    expect(await eventCount()).toBe(before + 4);
  });

  it('is not ready, naming the projector and the event', async () => {
    const r = await send('GET', '/readyz');
    expect(r.status).toBe(503);
    expect(r.json).toEqual({
      status: 'not ready',
      checks: { database: true, migrations: true, projections: false, readModels: true },
      halted: [
        {
          projector: 'state-resource-lifecycles',
          position: poisonPosition,
          transactionId: expect.any(String),
          stream: 'state-poisoned',
          type: 'LifecycleOpened',
          reason: expect.stringContaining('index row size'),
          since: expect.any(String),
        },
      ],
    });
  });

  it('answers retries of the same LOCK and POST with 200 once skipped, writing nothing new', async () => {
    const skipped = await send(
      'POST',
      '/v1/admin/projections/skip',
      JSON.stringify({
        projector: 'state-resource-lifecycles',
        position: poisonPosition,
        reason: 'test',
      }),
    );
    expect(skipped.status).toBe(200);
    expect(skipped.json).toEqual({
      projector: 'state-resource-lifecycles',
      position: poisonPosition,
      stream: 'state-poisoned',
      type: 'LifecycleOpened',
    });
    const before = await eventCount();
    expect((await send('LOCK', `/v1/states/${name}`, lock)).status).toBe(200);
    expect(await eventCount()).toBe(before);
    // A LOCK that only reuses the ID is still another process: refused, with the holder.
    const reuse = await send(
      'LOCK',
      `/v1/states/${name}`,
      JSON.stringify({ ...JSON.parse(lock), Who: 'someone-else' }),
    );
    expect({ status: reuse.status, holder: reuse.json }).toEqual({
      status: 423,
      holder: JSON.parse(lock),
    });
    expect((await send('UNLOCK', `/v1/states/${name}`, lock)).status).toBe(200);
    // The POST made unlocked, retried unlocked: the same version.
    const unlocked = await eventCount();
    expect((await send('POST', `/v1/states/${name}`, doc)).status).toBe(200);
    expect(await eventCount()).toBe(unlocked);
    const history = await send('GET', `/v1/api/states/${name}/history`);
    expect((history.json!.versions as unknown[]).length).toBe(1);
    expect((await send('GET', '/readyz')).status).toBe(200);
  });
});
