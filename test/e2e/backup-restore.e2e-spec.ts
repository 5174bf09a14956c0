import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client } from 'pg';
import { EmbeddedPostgres } from '../../src/infrastructure/postgres/embedded-postgres';
import { Database } from '../../src/infrastructure/postgres/database';
import { KLD, KldProcess, startKld } from '../support/kld-process';
import { postgresTools } from '../support/postgres-tools';
import {
  lockInfo,
  READ_MODEL_TABLES,
  snapshotTables,
  testDocument,
} from '../support/state-harness';
import { quietLogger } from '../support/test-database';

/** What docs/operations.md tells operators to back up: the log, not the read models. */
const EVENT_TABLES = ['kl_events', 'kl_streams', 'kl_snapshots', 'kl_projection_skips'];
const REFRESH_TABLES = ['refresh_runs', 'refresh_results'];

/**
 * Backup and restore as docs/operations.md describes it, into a new
 * PostgreSQL cluster: pg_dump of the event tables of a serving kld,
 * `kld migrate` on a fresh database, pg_restore, `kld projections rebuild`;
 * every state, version, lock and lifecycle comes back identical.
 */
describe('backup and restore', () => {
  const tools = postgresTools();
  let dir: string;
  const clusters: EmbeddedPostgres[] = [];
  const servers: KldProcess[] = [];
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-backup-'));
    fs.chmodSync(dir, 0o711); // as root, the postgres user must reach the clusters' data
  });
  afterAll(async () => {
    for (const s of servers) await s.stop();
    for (const c of clusters) await c.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** A new cluster of pg_dump's own version, with an empty database `kilolock`. */
  async function newCluster(name: string): Promise<string> {
    const pg = await EmbeddedPostgres.start(path.join(dir, name), quietLogger, tools);
    clusters.push(pg);
    const c = new Client({ connectionString: pg.url });
    await c.connect();
    await c.query('CREATE DATABASE kilolock');
    await c.end();
    const url = new URL(pg.url);
    url.pathname = '/kilolock';
    return url.toString();
  }
  const kld = (url: string, args: string[]) =>
    spawnSync(process.execPath, [KLD, ...args], {
      env: { ...process.env, KL_DATABASE_URL: url, KL_LOG_LEVEL: 'warn' },
      encoding: 'utf8',
      timeout: 120_000,
    });
  const send = (base: string, method: string, name: string, body?: unknown, query = '') =>
    fetch(`${base}/v1/states/${name}${query}`, {
      method,
      headers: { 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const expectOk = async (r: Promise<Response>) => {
    const res = await r;
    expect([res.status, await res.text()]).toEqual([200, expect.anything()]);
  };

  /** Everything a user can see of the states, read through SQL and HTTP. */
  async function observe(url: string, base: string): Promise<unknown> {
    const db = new Database(url);
    try {
      const tables = await snapshotTables(db, [...READ_MODEL_TABLES, ...REFRESH_TABLES]);
      const versions = await db.query<{ name: string; version: number }>(
        `SELECT s.name, v.version FROM state_versions v JOIN states s USING (state_id)
          ORDER BY 1, 2`,
      );
      const documents: Record<string, string> = {};
      for (const { name, version } of versions) {
        const r = await fetch(`${base}/v1/states/${name}?version=${version}`);
        documents[`${name}@${version}`] = `${r.status} ${await r.text()}`;
      }
      for (const name of ['team/a', 'team/b', 'team/gone', 'team/locked']) {
        const r = await fetch(`${base}/v1/states/${name}`);
        documents[name] = `${r.status} ${await r.text()}`;
      }
      const locks = await (await fetch(`${base}/v1/api/locks`)).json();
      return { tables, documents, locks };
    } finally {
      await db.close();
    }
  }

  it('brings back every state, version, lock and lifecycle in a new cluster', async () => {
    const sourceUrl = await newCluster('source');
    const source = await startKld({ KL_DATABASE_URL: sourceUrl }, 60_000);
    servers.push(source);
    const base = source.url;

    // a history with everything the read models show
    await expectOk(send(base, 'LOCK', 'team/a', lockInfo('lock-1')));
    for (let serial = 1; serial <= 3; serial++) {
      const doc = testDocument(serial, [
        { name: 'web', key: 0, input: 'w' },
        { name: 'web', key: 1, input: `w-${serial}` },
        ...(serial < 3 ? [{ name: 'db', input: 'd' }] : []),
      ]);
      await expectOk(send(base, 'POST', 'team/a', doc, '?ID=lock-1'));
    }
    await expectOk(send(base, 'UNLOCK', 'team/a', lockInfo('lock-1')));
    await expectOk(send(base, 'POST', 'team/b', testDocument(1, [{ name: 'q', input: '1' }])));
    await expectOk(
      send(base, 'POST', 'team/b', testDocument(1, [{ name: 'q', input: '2' }], {}, 'other')),
    );
    await expectOk(send(base, 'POST', 'team/gone', testDocument(1, [{ name: 'x', input: 'x' }])));
    await expectOk(send(base, 'DELETE', 'team/gone'));
    await expectOk(send(base, 'LOCK', 'team/locked', lockInfo('held', 'carol@ci')));
    const run = await fetch(`${base}/v1/refresh-runs`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ state: 'team/a', dry_run: true }),
    });
    const { run_id } = (await run.json()) as { run_id: string };
    await fetch(`${base}/v1/refresh-runs/${run_id}/finish`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ status: 'cancelled' }),
    });
    const before = await observe(sourceUrl, base);

    // the backup, taken while kld serves
    const dump = path.join(dir, 'kilolock-events.dump');
    execFileSync(tools.pgDump, [
      '--format=custom',
      '--data-only',
      ...EVENT_TABLES.map((t) => `--table=${t}`),
      `--file=${dump}`,
      `--dbname=${sourceUrl}`,
    ]);
    await source.stop();
    servers.pop();

    // the restore, into a database of a cluster that never saw these events
    const targetUrl = await newCluster('target');
    expect(kld(targetUrl, ['migrate']).status).toBe(0);
    execFileSync(tools.pgRestore, ['--data-only', `--dbname=${targetUrl}`, dump]);

    // served before the rebuild, the restored log would read as empty: refused
    const early = kld(targetUrl, ['serve', '--listen', '127.0.0.1:0']);
    expect(early.status).toBe(2);
    expect(early.stderr).toMatch(/restored from another cluster\. Run `kld projections rebuild`/);

    const rebuilt = kld(targetUrl, ['projections', 'rebuild']);
    expect([rebuilt.status, rebuilt.stderr]).toEqual([0, '']);
    expect(rebuilt.stdout).toMatch(/events restored from another PostgreSQL cluster made readable/);
    expect(rebuilt.stdout).toMatch(/state-catalog: \d+ events replayed/);

    const target = await startKld({ KL_DATABASE_URL: targetUrl }, 60_000);
    servers.push(target);
    const after = await observe(targetUrl, target.url);
    expect(after).toEqual(before);

    // and it goes on: the next commit is version 4, after every restored event
    await expectOk(
      send(target.url, 'POST', 'team/a', testDocument(4, [{ name: 'web', key: 0, input: 'w' }])),
    );
    const db = new Database(targetUrl);
    try {
      const [v] = await db.query<{ version: number }>(
        `SELECT max(v.version) AS version FROM state_versions v JOIN states s USING (state_id)
          WHERE s.name = 'team/a'`,
      );
      expect(v.version).toBe(4);
      // in log order, the new commit's events come last
      const [last] = await db.query<{ stream_id: string; type: string }>(
        `SELECT stream_id, type FROM kl_events
          ORDER BY transaction_id DESC, global_position DESC LIMIT 1`,
      );
      const [newest] = await db.query<{ type: string }>(
        `SELECT type FROM kl_events WHERE stream_id = 'state-team/a'
          ORDER BY stream_revision DESC LIMIT 1`,
      );
      expect(last).toEqual({ stream_id: 'state-team/a', type: newest.type });
    } finally {
      await db.close();
    }
  }, 240_000);
});
