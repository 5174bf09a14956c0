import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import request from 'supertest';
import { Client } from 'pg';
import { KldServer, startServer } from '../../src/app/server';
import { loadConfig } from '../../src/infrastructure/config/config';
import {
  INTACT_MARKER,
  setReadModelPersistence,
  UNLOGGED_READ_MODELS,
} from '../../src/infrastructure/postgres/unlogged-read-models';
import { LOCK_NAMESPACE } from '../../src/projections/projection-runner';
import { lockInfo, testDocument } from '../support/state-harness';
import { createTestDatabase, quietLogger } from '../support/test-database';

/**
 * The bulk read models as UNLOGGED tables (KL_UNLOGGED_READ_MODELS), through
 * real crashes of kld's own embedded PostgreSQL (a crash resets every
 * unlogged table of the cluster, so not the shared test server): kld must
 * notice the emptied tables, answer their reads 503 or right, never wrong,
 * and rebuild them from the log.
 */
const STATE = 'crash/network';
const VERSIONS = 3;

const doc = (serial: number) =>
  JSON.stringify(
    testDocument(
      serial,
      Array.from({ length: 5 + serial }, (_, i) => ({
        name: `n${i}`,
        input: `v${serial}-${i}`,
        ...(i > 0 ? { dependsOn: [`terraform_data.n${i - 1}`] } : {}),
      })),
      { out: { value: `serial ${serial}`, type: 'string' } },
      'crash-lineage',
    ),
  );

async function sql<R extends object>(url: string, text: string): Promise<R[]> {
  const client = new Client({ connectionString: url });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return (await client.query<R>(text)).rows;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** What a reader of the state sees: every version's bytes, the resources now and the query surface. */
async function served(server: KldServer): Promise<Record<string, unknown>> {
  const http = server.app.getHttpServer();
  const seen: Record<string, unknown> = {};
  for (let v = 1; v <= VERSIONS; v++) {
    seen[`v${v}`] = (await request(http).get(`/v1/states/${STATE}?version=${v}`).expect(200)).text;
  }
  seen.current = (await request(http).get(`/v1/states/${STATE}`).expect(200)).text;
  seen.resources = (await request(http).get(`/v1/api/states/${STATE}/resources`).expect(200)).body;
  seen.query = (
    await request(http)
      .post('/v1/query')
      .type('json')
      .send({ sql: 'SELECT address, create_version FROM resources ORDER BY 1, 2' })
      .expect(200)
  ).body;
  return seen;
}

/**
 * Every answer from the crash on is 503 (retryable) or exactly what was
 * served before: polled until the whole state is served again.
 */
async function servedAgain(
  server: KldServer,
  before: Record<string, unknown>,
): Promise<{ refused: number }> {
  const http = server.app.getHttpServer();
  let refused = 0;
  // 50 ms apart, at most 40 s (the test's own limit is 60 s): this small state rebuilds in a second or two
  for (let polls = 0; ; polls++) {
    if (polls > 800) throw new Error(`not served again after ${polls} polls (${refused} refused)`);
    const r = await request(http).get(`/v1/states/${STATE}`);
    if (r.status === 503) {
      expect(r.body.error.code).toBe('SERVER.UNAVAILABLE');
      refused++;
      await new Promise((res) => setTimeout(res, 50));
      continue;
    }
    expect([r.status, r.text]).toEqual([200, before.current]);
    const ready = await request(http).get('/readyz');
    if (ready.status === 200) break;
    await new Promise((res) => setTimeout(res, 50));
  }
  expect(await served(server)).toEqual(before);
  return { refused };
}

function postmasterPid(dataDir: string): number {
  return Number(
    fs.readFileSync(path.join(dataDir, 'pgdata', 'postmaster.pid'), 'utf8').split('\n')[0],
  );
}

/** kill -9 of one backend of `url`'s database: the postmaster ends every backend and recovers. */
async function crashBackend(url: string): Promise<void> {
  const victim = new Client({ connectionString: url });
  victim.on('error', () => undefined);
  await victim.connect();
  const [{ pid }] = (await victim.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows;
  process.kill(pid, 'SIGKILL');
  await victim.end().catch(() => undefined);
  await untilAccepting(url);
}

async function untilAccepting(url: string): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      await sql(url, 'SELECT 1');
      return;
    } catch (err) {
      if (i > 600) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

describe('unlogged read models with the embedded PostgreSQL', () => {
  let dataDir: string;
  let server: KldServer | null = null;
  const start = async () =>
    (server = await startServer(
      loadConfig({ KL_DATA_DIR: dataDir, KL_LISTEN: '127.0.0.1:0', KL_GRPC_LISTEN: 'off' }),
      quietLogger,
    ));

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-unlogged-'));
    const s = await start();
    const http = s.app.getHttpServer();
    for (let serial = 1; serial <= VERSIONS; serial++) {
      await request(http).post(`/v1/states/${STATE}`).type('json').send(doc(serial)).expect(200);
    }
  });
  afterAll(async () => {
    await server?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('makes the bulk read models and their marker UNLOGGED by default', async () => {
    const rows = await sql<{ relname: string; relpersistence: string }>(
      server!.databaseUrl,
      `SELECT relname, relpersistence FROM pg_class
        WHERE relname IN (${[...UNLOGGED_READ_MODELS, INTACT_MARKER].map((t) => `'${t}'`).join(', ')})
          AND relkind = 'r' AND relnamespace = 'public'::regnamespace ORDER BY 1`,
    );
    expect(rows.map((r) => [r.relname, r.relpersistence])).toEqual(
      [...UNLOGGED_READ_MODELS, INTACT_MARKER].sort().map((t) => [t, 'u']),
    );
    // the log, the checkpoints and the catalog stay logged
    const logged = await sql<{ relpersistence: string }>(
      server!.databaseUrl,
      `SELECT DISTINCT relpersistence FROM pg_class
        WHERE relname IN ('kl_events', 'kl_checkpoints', 'states', 'state_versions')`,
    );
    expect(logged).toEqual([{ relpersistence: 'p' }]);
  });

  it('notices a crash while it serves, answers 503 or the right bytes, and rebuilds', async () => {
    const before = await served(server!);
    await crashBackend(server!.databaseUrl);
    // the crash emptied them: the log and the versions are still there
    const [counts] = await sql<{ resources: string; versions: string }>(
      server!.databaseUrl,
      'SELECT (SELECT count(*) FROM resources) AS resources, (SELECT count(*) FROM state_versions) AS versions',
    );
    expect(counts.versions).toBe(String(VERSIONS));
    await servedAgain(server!, before);
    // and it goes on: the next commit is served
    const http = server!.app.getHttpServer();
    await request(http)
      .post(`/v1/states/${STATE}`)
      .type('json')
      .send(doc(VERSIONS + 1))
      .expect(200);
    const next = await request(http).get(`/v1/states/${STATE}`).expect(200);
    expect(JSON.parse(next.text)).toEqual(JSON.parse(doc(VERSIONS + 1)));
  });

  it('rebuilds at start after the postmaster was killed while kld was down', async () => {
    const pm = postmasterPid(dataDir);
    const before = await served(server!);
    // kld gone mid-flight, then its PostgreSQL killed outright
    process.kill(pm, 'SIGKILL');
    await server!.close();
    server = null;
    for (let i = 0; i < 100 && isAlive(pm); i++) await new Promise((r) => setTimeout(r, 50));
    await start();
    await servedAgain(server!, before);
  });
});

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('unlogged read models on a database of ones own (KL_DATABASE_URL)', () => {
  it('stays logged unless asked, and switching back and forth keeps every row', async () => {
    const t = await createTestDatabase();
    try {
      const server = await startServer(
        loadConfig({ KL_DATABASE_URL: t.url, KL_LISTEN: '127.0.0.1:0', KL_GRPC_LISTEN: 'off' }),
        quietLogger,
      );
      try {
        const http = server.app.getHttpServer();
        for (let serial = 1; serial <= 2; serial++) {
          await request(http)
            .post(`/v1/states/${STATE}`)
            .type('json')
            .send(doc(serial))
            .expect(200);
        }
      } finally {
        await server.close();
      }
      const persistence = () =>
        sql<{ p: string }>(
          t.url,
          `SELECT string_agg(DISTINCT relpersistence::text, '') AS p FROM pg_class
            WHERE relname = ANY(ARRAY['${[...UNLOGGED_READ_MODELS, INTACT_MARKER].join("','")}'])
              AND relkind = 'r'`,
        );
      const rows = () =>
        sql<Record<string, string>>(
          t.url,
          `SELECT ${[...UNLOGGED_READ_MODELS, INTACT_MARKER]
            .map((n) => `(SELECT count(*) FROM ${n}) AS ${n}`)
            .join(', ')}`,
        );
      expect(await persistence()).toEqual([{ p: 'p' }]);
      const [counted] = await rows();
      expect(Number(counted.resources)).toBeGreaterThan(0);
      expect(Number(counted.raw_state_chunks)).toBeGreaterThan(0);

      const client = new Client({ connectionString: t.url });
      await client.connect();
      try {
        expect((await setReadModelPersistence(client, true)).sort()).toEqual(
          [...UNLOGGED_READ_MODELS, INTACT_MARKER].sort(),
        );
        expect(await persistence()).toEqual([{ p: 'u' }]);
        expect(await rows()).toEqual([counted]);
        expect(await setReadModelPersistence(client, true)).toEqual([]);
        await setReadModelPersistence(client, false);
        expect(await persistence()).toEqual([{ p: 'p' }]);
        expect(await rows()).toEqual([counted]);
      } finally {
        await client.end();
      }
    } finally {
      await t.drop();
    }
  });
});

describe('while the read models are being rebuilt', () => {
  it('serves what reads only logged tables, and refuses every read of a lost one', async () => {
    const t = await createTestDatabase();
    const holder = new Client({ connectionString: t.url });
    await holder.connect();
    let server: KldServer | null = null;
    try {
      server = await startServer(
        loadConfig({ KL_DATABASE_URL: t.url, KL_LISTEN: '127.0.0.1:0', KL_GRPC_LISTEN: 'off' }),
        quietLogger,
      );
      const http = server.app.getHttpServer();
      for (let serial = 1; serial <= VERSIONS; serial++) {
        await request(http).post(`/v1/states/${STATE}`).type('json').send(doc(serial)).expect(200);
      }
      const before = await served(server);
      const query = (sqlText: string) =>
        request(http).post('/v1/query').type('json').send({ sql: sqlText });

      // The rebuild kld starts waits: another one (this session) holds its lock.
      await holder.query('SELECT pg_advisory_lock($1, hashtext($2))', [
        LOCK_NAMESPACE,
        'kl:rebuild',
      ]);
      // What a crash leaves: the read models and the marker empty, every connection ended.
      await holder.query(`TRUNCATE ${[...UNLOGGED_READ_MODELS, INTACT_MARKER].join(', ')}`);
      await holder.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid()`,
      );
      for (let i = 0; (await request(http).get('/readyz')).body.checks?.readModels !== false; i++) {
        if (i > 200) throw new Error('kld did not notice the emptied read models');
        await new Promise((r) => setTimeout(r, 50));
      }

      // Every read of a lost table is refused: the document, a past version, the resources, a query.
      const refused = [
        await request(http).get(`/v1/states/${STATE}`),
        await request(http).get(`/v1/states/${STATE}?version=1`),
        await request(http).get(`/v1/api/states/${STATE}/resources`),
        await query('SELECT count(*) FROM resources'),
        await query('SELECT v.version FROM state_versions v JOIN outputs o USING (state_id)'),
      ];
      expect(refused.map((r) => [r.status, r.body.error?.code])).toEqual(
        refused.map(() => [503, 'SERVER.UNAVAILABLE']),
      );

      // What reads only logged tables is served, `state_versions.outputs` included.
      const versions = await query('SELECT version, outputs FROM state_versions ORDER BY 1');
      expect([versions.status, versions.body.rows?.length]).toEqual([200, VERSIONS]);
      // A commit is stored, and its version listed at once: the catalog's
      // projector writes `state_versions.outputs` and is not held up.
      const committing = request(http)
        .post(`/v1/states/${STATE}`)
        .type('json')
        .send(doc(VERSIONS + 1))
        .then((r) => r);
      for (let i = 0; ; i++) {
        const history = await request(http).get(`/v1/api/states/${STATE}/history`).expect(200);
        const listed = (history.body.versions as { version: number }[]).map((v) => v.version);
        if (listed.includes(VERSIONS + 1)) break;
        if (i > 200) throw new Error(`version ${VERSIONS + 1} not listed: ${listed.join(', ')}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      // terraform's lock and unlock feed only logged tables: answered at once
      const lock = lockInfo('rebuild-lock');
      await request(http).post(`/v1/state-lock/${STATE}`).type('json').send(lock).expect(200);
      const locks = await request(http).get('/v1/api/locks').expect(200);
      expect(JSON.stringify(locks.body)).toContain('rebuild-lock');
      await request(http).post(`/v1/state-unlock/${STATE}`).type('json').send(lock).expect(200);

      // Once the rebuild may run, everything is served again, the commit made meanwhile too.
      await holder.query('SELECT pg_advisory_unlock($1, hashtext($2))', [
        LOCK_NAMESPACE,
        'kl:rebuild',
      ]);
      const committed = await committing;
      expect([200, 503]).toContain(committed.status); // 503: SERVER.LAGGING, stored all the same
      for (let i = 0; (await request(http).get('/readyz')).status !== 200; i++) {
        if (i > 1200) throw new Error('the read models were not rebuilt');
        await new Promise((r) => setTimeout(r, 50));
      }
      const current = await request(http).get(`/v1/states/${STATE}`).expect(200);
      expect(JSON.parse(current.text)).toEqual(JSON.parse(doc(VERSIONS + 1)));
      const past = await request(http).get(`/v1/states/${STATE}?version=${VERSIONS}`).expect(200);
      expect(past.text).toBe(before.current);
    } finally {
      await server?.close();
      await holder.end().catch(() => undefined);
      await t.drop();
    }
  });
});
