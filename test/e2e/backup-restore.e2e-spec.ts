import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client } from 'pg';
import { EmbeddedPostgres } from '../../src/infrastructure/postgres/embedded-postgres';
import { Database } from '../../src/infrastructure/postgres/database';
import { KLD, KldProcess, startKld } from '../support/kld-process';
import { postgresTools } from '../support/postgres-tools';
import { advanceTransactionIds, nextTransactionId } from '../support/restore';
import {
  lockInfo,
  READ_MODEL_TABLES,
  snapshotTables,
  testDocument,
} from '../support/state-harness';
import { quietLogger } from '../support/test-database';

/** What docs/operations.md tells operators to back up: the log, not the read models. */
const EVENT_TABLES = [
  'kl_events',
  'kl_streams',
  'kl_log_epochs',
  'kl_snapshots',
  'kl_projection_skips',
];
const REFRESH_TABLES = ['refresh_runs', 'refresh_results'];

/**
 * Backup and restore as docs/operations.md describes it, into a new
 * PostgreSQL cluster: pg_dump of the event tables of a serving kld,
 * `kld migrate` on a fresh database, pg_restore, `kld projections rebuild`;
 * every state, version, lock and lifecycle comes back identical, and a
 * subscriber's saved position resumes exactly where it was (the restore opens
 * a new log epoch, docs/events.md) or, when the backup lacks it, is refused.
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

  /** The positions of the events `GET /v1/events` delivers after `from`, up to the head. */
  async function feed(base: string, from?: string): Promise<string[]> {
    const query = from === undefined ? '' : `&from=${from}`;
    const res = await fetch(`${base}/v1/events?follow=false${query}`);
    const body = await res.text();
    expect([res.status, body.slice(0, 200)]).toEqual([200, expect.anything()]);
    // Events are the frames without an `event:` line (caught-up has one).
    return body
      .split('\n\n')
      .filter((frame) => frame.startsWith('id: ') && !frame.includes('\nevent: '))
      .map((frame) => frame.slice(4, frame.indexOf('\n')));
  }
  const epoch = (position: string) => parseInt(position.slice(0, 4), 16);

  async function epochs(url: string): Promise<number[]> {
    const db = new Database(url);
    try {
      const rows = await db.query<{ epoch: number }>('SELECT epoch FROM kl_log_epochs ORDER BY 1');
      return rows.map((r) => r.epoch);
    } finally {
      await db.close();
    }
  }

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

  it('brings back every state, version, lock, lifecycle and feed position in a new cluster', async () => {
    const sourceUrl = await newCluster('source');
    const targetUrl = await newCluster('target');
    // The source cluster has run far ahead of the fresh one it is restored into.
    await advanceTransactionIds(sourceUrl, (await nextTransactionId(targetUrl)) + 3000n);
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
    const logged = await feed(base);
    const saved = logged[5]; // a subscriber had processed six events

    // the backup, taken while kld serves
    const dump = path.join(dir, 'kilolock-events.dump');
    execFileSync(tools.pgDump, [
      '--format=custom',
      '--data-only',
      ...EVENT_TABLES.map((t) => `--table=${t}`),
      `--file=${dump}`,
      `--dbname=${sourceUrl}`,
    ]);
    // the source goes on after the backup; a subscriber reads that event too
    await expectOk(send(base, 'POST', 'team/b', testDocument(2, [{ name: 'q', input: '3' }])));
    const lost = (await feed(base)).at(-1)!;
    expect(logged).not.toContain(lost);
    await source.stop();
    servers.pop();

    // the restore, into a database of a cluster that never saw these events
    expect(kld(targetUrl, ['migrate']).status).toBe(0);
    const db = new Database(targetUrl);
    try {
      await db.query('TRUNCATE kl_log_epochs'); // the backup's epochs replace the fresh log's
    } finally {
      await db.close();
    }
    execFileSync(tools.pgRestore, ['--data-only', `--dbname=${targetUrl}`, dump]);

    const rebuilt = kld(targetUrl, ['projections', 'rebuild']);
    expect(rebuilt.status).toBe(0);
    // its one warning on stderr, its answer alone on stdout
    expect(
      rebuilt.stderr
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line).msg),
    ).toEqual([expect.stringContaining('new events are written in a new log epoch')]);
    expect(rebuilt.stdout).toMatch(/state-catalog: \d+ events replayed/);
    // this cluster's transaction ids are behind the log's: what it writes goes in a new epoch
    expect(await epochs(targetUrl)).toEqual([0, 1]);

    const target = await startKld({ KL_DATABASE_URL: targetUrl }, 60_000);
    servers.push(target);
    const after = await observe(targetUrl, target.url);
    expect(after).toEqual(before);

    // the log is the same, position for position; the saved position resumes exactly
    expect(await feed(target.url)).toEqual(logged);
    expect(await feed(target.url, saved)).toEqual(logged.slice(6));
    // a position the backup does not have is refused, never passed over
    const refused = await fetch(`${target.url}/v1/events?follow=false&from=${lost}`);
    expect(refused.status).toBe(400);
    expect(await refused.json()).toEqual({
      error: {
        code: 'EVENTS.INVALID_POSITION',
        message: expect.stringContaining(`position ${lost} is not in this log`),
      },
    });

    // and it goes on: the next commit is version 4, after every restored event
    await expectOk(
      send(target.url, 'POST', 'team/a', testDocument(4, [{ name: 'web', key: 0, input: 'w' }])),
    );
    // after every restored event, in the new epoch, also for the saved position
    const resumed = await feed(target.url, saved);
    expect(resumed.slice(0, logged.length - 6)).toEqual(logged.slice(6));
    const written = resumed.slice(logged.length - 6);
    expect(written.length).toBeGreaterThan(0);
    expect(written.map(epoch)).toEqual(written.map(() => 1));
    const check = new Database(targetUrl);
    try {
      const [v] = await check.query<{ version: number }>(
        `SELECT max(v.version) AS version FROM state_versions v JOIN states s USING (state_id)
          WHERE s.name = 'team/a'`,
      );
      expect(v.version).toBe(4);
      // in log order, the new commit's events come last
      const [last] = await check.query<{ stream_id: string; type: string }>(
        `SELECT stream_id, type FROM kl_events
          ORDER BY transaction_id DESC, global_position DESC LIMIT 1`,
      );
      const [newest] = await check.query<{ type: string }>(
        `SELECT type FROM kl_events WHERE stream_id = 'state-team/a'
          ORDER BY stream_revision DESC LIMIT 1`,
      );
      expect(last).toEqual({ stream_id: 'state-team/a', type: newest.type });
    } finally {
      await check.close();
    }
  }, 240_000);
});
