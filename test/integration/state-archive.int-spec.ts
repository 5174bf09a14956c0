import { createHash } from 'node:crypto';
import { KldServer, startServer } from '../../src/app/server';
import { KilolockClient } from '../../src/cli/kilolock-client';
import { stringifyJson } from '../../src/domain/terraform';
import { loadConfig } from '../../src/infrastructure/config/config';
import { defaultActor } from '../../src/infrastructure/rest/kld-http-client';
import {
  READ_MODEL_TABLES,
  snapshotTables,
  testDocument,
  TestInstance,
} from '../support/state-harness';
import { createTestDatabase, quietLogger, TestDatabase } from '../support/test-database';

const BIG = '123456789012345678901234567890';

describe('archive export and import', () => {
  let t: TestDatabase;
  let server: KldServer;
  let kl: KilolockClient;

  beforeAll(async () => {
    t = await createTestDatabase();
    server = await startServer(
      loadConfig({ KL_DATABASE_URL: t.url, KL_LISTEN: '127.0.0.1:0', KL_GRPC_LISTEN: 'off' }),
      quietLogger,
    );
    kl = new KilolockClient(server.url);
  });
  afterAll(async () => {
    await server?.close();
    await t.drop();
  });

  const call = async (method: string, path: string, body?: string, actor = 'alice') => {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: {
        ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}),
        Authorization: `Basic ${btoa(`${actor}:`)}`,
      },
      body,
    });
    if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
    return res;
  };
  const lockInfo = (id: string) =>
    JSON.stringify({ ID: id, Operation: 'OperationTypeApply', Who: 'alice@ci', Version: '1.11.4' });
  const planLockInfo = (id: string) =>
    JSON.stringify({
      ID: id,
      Operation: 'OperationTypePlan',
      Who: 'dave@laptop',
      Version: '1.11.4',
    });
  const docText = (serial: number, instances: TestInstance[], lineage: string) =>
    stringifyJson(
      testDocument(serial, instances, { n: { value: serial, type: 'number' } }, lineage),
    ).replace('"outputs":{', `"outputs":{"big":{"value":${BIG},"type":"number"},`);

  /** 50 versions under locks, a force-unlock, a delete and a second life under the same name. */
  async function writeHistory(name: string): Promise<void> {
    const instances = (v: number): TestInstance[] =>
      Array.from({ length: 5 + (v % 4) }, (_, i) => ({
        name: 'node',
        key: i,
        input: i === v % 5 ? `changed at ${v}` : `node ${i}`,
      }));
    for (let v = 1; v <= 50; v++) {
      const lock = `lock-${name}-${v}`;
      const actor = v % 2 ? 'alice' : 'bob';
      if (v % 10 === 5) {
        // Two plans share the state for a while before the next apply locks it.
        for (const plan of ['plan-a', 'plan-b']) {
          await call('POST', `/v1/state-lock/${name}`, planLockInfo(`${plan}-${v}`), 'dave');
        }
        for (const plan of ['plan-a', 'plan-b']) {
          await call('POST', `/v1/state-unlock/${name}`, planLockInfo(`${plan}-${v}`), 'dave');
        }
      }
      await call('POST', `/v1/state-lock/${name}`, lockInfo(lock), actor);
      await call('POST', `/v1/states/${name}?ID=${lock}`, docText(v, instances(v), 'first'), actor);
      // Once, the run dies holding its lock and an operator releases it.
      if (v === 30) await call('POST', `/v1/api/states/${name}/force-unlock`, '{}', 'operator');
      else await call('POST', `/v1/state-unlock/${name}`, lockInfo(lock), actor);
    }
    await call('DELETE', `/v1/states/${name}`);
    for (let v = 1; v <= 3; v++) {
      await call('POST', `/v1/states/${name}`, docText(v, instances(v * 7), 'second'), 'carol');
    }
  }

  /** Everything a user sees of one state's history, without its name and ids. */
  async function seen(name: string): Promise<unknown> {
    const history = await kl.history(name);
    const documents = [];
    for (const v of history.versions) {
      const res = await call('GET', `/v1/states/${name}?version=${v.version}`);
      documents.push(await res.text());
    }
    const versions = await t.db.query(
      `SELECT sv.version, sv.serial, sv.lineage, sv.source, sv.actor, sv.created_at,
              sv.instance_count, s.deleted_at IS NOT NULL AS deleted
         FROM state_versions sv JOIN states s USING (state_id)
        WHERE s.name = $1 ORDER BY sv.created_at, sv.version`,
      [name],
    );
    const events = await t.db.query(
      `SELECT type, data::jsonb - 'stateId' - 'name' AS data, actor, occurred_at
         FROM event_log WHERE stream = $1 ORDER BY position`,
      [`state-${name}`],
    );
    return {
      history: { ...history, state: undefined, stateId: undefined },
      documents,
      versions,
      events,
    };
  }

  async function archiveOf(name: string): Promise<string> {
    const chunks: Buffer[] = [];
    for await (const chunk of await kl.exportArchive(name)) chunks.push(Buffer.from(chunk));
    return Buffer.concat(chunks).toString('utf8');
  }

  it('recreates every version, lock, actor and time under a new name', async () => {
    await writeHistory('team/original');
    const archive = await archiveOf('team/original');
    const [header, ...lines] = archive.trimEnd().split('\n');
    expect(JSON.parse(header)).toMatchObject({
      format: 'kilolock-state-archive',
      version: 1,
      state: 'team/original',
      events: lines.length,
      checksum: `sha256:${createHash('sha256')
        .update(lines.map((l) => `${l}\n`).join(''))
        .digest('hex')}`,
    });
    expect(archive).toContain(`"value":${BIG}`);

    const imported = await kl.importArchive(Buffer.from(archive), 'team/copy');
    expect(imported).toEqual({ state: 'team/copy', events: lines.length, versions: 53 });
    expect(await seen('team/copy')).toEqual(await seen('team/original'));
    const history = await kl.history('team/copy');
    expect(history.versions).toHaveLength(3);
    expect(history.versions.map((v) => v.actor)).toEqual(['carol', 'carol', 'carol']);

    // Each recreated event says which one it recreates.
    const [provenance] = await t.db.query<{ metadata: Record<string, unknown> }>(
      `SELECT metadata FROM kl_events WHERE stream_id = 'state-team/copy' AND stream_revision = 0`,
    );
    expect(provenance.metadata.imported).toMatchObject({
      eventId: JSON.parse(lines[0]).eventId,
      stream: 'state-team/original',
      position: JSON.parse(lines[0]).position,
      importedBy: defaultActor(), // kl's X-Kilolock-Actor
    });

    // A round trip of the copy gives the same history again.
    const again = await archiveOf('team/copy');
    await kl.importArchive(Buffer.from(again), 'team/copy2');
    expect(await seen('team/copy2')).toEqual(await seen('team/original'));

    // The read models treat imported events as live ones: a rebuild changes nothing.
    const before = await snapshotTables(t.db, READ_MODEL_TABLES, ['updated_at']);
    await call('POST', '/v1/admin/projections/rebuild', '{}');
    expect(await snapshotTables(t.db, READ_MODEL_TABLES, ['updated_at'])).toEqual(before);
  }, 240_000); // ~160 requests, each waiting for the read models: a minute alone on 2 cores

  it('gives the recreated events time-ordered ids, as a command gives its events', async () => {
    await call('POST', '/v1/states/ids/original', docText(1, [{ name: 'a', input: 'x' }], 'ids'));
    await kl.importArchive(Buffer.from(await archiveOf('ids/original')), 'ids/copy');
    // The version nibble of each event's uuid, by stream: 7 (time-ordered), never 4 (random).
    const versions = await t.db.query<{ stream_id: string; version: string }>(
      `SELECT DISTINCT stream_id, substr(event_id::text, 15, 1) AS version FROM kl_events
        WHERE stream_id IN ('state-ids/original', 'state-ids/copy') ORDER BY stream_id`,
    );
    expect(versions).toEqual([
      { stream_id: 'state-ids/copy', version: '7' },
      { stream_id: 'state-ids/original', version: '7' },
    ]);
  });

  it('refuses a name that has a history, a changed archive, and a history the state could not have written', async () => {
    const archive = await archiveOf('team/original');
    const refusal = async (body: string, name?: string) => {
      const res = await fetch(`${server.url}/v1/archives${name ? `?name=${name}` : ''}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/x-ndjson' },
        body,
      });
      return { status: res.status, ...((await res.json()) as { error: object }).error };
    };
    const count = async () => (await t.db.query('SELECT count(*)::int AS n FROM kl_events'))[0];
    const before = await count();

    expect(await refusal(archive)).toMatchObject({
      status: 409,
      code: 'STATE.EXISTS',
      message: expect.stringContaining('state team/original already has a history here'),
    });
    expect(await refusal(archive.replace('"serial":7,', '"serial":8,'), 'team/x')).toMatchObject({
      status: 400,
      code: 'ARCHIVE.INVALID',
      message: 'the checksum does not match: the archive was changed or cut short',
    });
    // Changed, with a checksum to match: a lifecycle hash that is not the instance's.
    const [header, ...lines] = archive.trimEnd().split('\n');
    const at = lines.findIndex((l) => l.includes('"type":"LifecycleOpened"'));
    lines[at] = lines[at].replace(/"hash":"[0-9a-f]{8}/, '"hash":"00000000');
    const body = lines.map((l) => `${l}\n`).join('');
    const forged = JSON.stringify({
      ...JSON.parse(header),
      checksum: `sha256:${createHash('sha256').update(body).digest('hex')}`,
    });
    expect(await refusal(`${forged}\n${body}`, 'team/x')).toMatchObject({
      status: 400,
      code: 'ARCHIVE.INVALID',
      message: expect.stringMatching(
        new RegExp(
          `^archive event ${at - 1} \\(ApplyCommitted\\) is not a history this state could have: the state would write`,
        ),
      ),
    });
    expect(await refusal('{"format":"something"}\n', 'team/x')).toMatchObject({ status: 400 });
    expect(await count()).toEqual(before);
  });

  it('refuses, naming why, a history with kl apply runs, which it cannot recreate yet', async () => {
    const name = 'team/with-run';
    await call('POST', `/v1/states/${name}`, docText(1, [{ name: 'a', input: 'x' }], 'runs'));
    const started = await fetch(`${server.url}/v1/api/states/${name}/apply-runs`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ base_version: 1, write: ['terraform_data.a'], read: [] }),
    });
    const answer = (await started.json()) as { run_id: string };
    expect(started.status).toBe(201);
    const runId = answer.run_id;
    await call('POST', `/v1/api/states/${name}/apply-runs/${runId}/abort`, '{}');

    const before = (await t.db.query('SELECT count(*)::int AS n FROM kl_events'))[0];
    const res = await fetch(`${server.url}/v1/archives?name=team/with-run-copy`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-ndjson' },
      body: await archiveOf(name),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: object }).error).toMatchObject({
      code: 'ARCHIVE.INVALID',
      message: expect.stringContaining('histories with kl apply runs cannot be recreated'),
    });
    expect((await t.db.query('SELECT count(*)::int AS n FROM kl_events'))[0]).toEqual(before);
  });
});
