import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Client } from 'pg';
import { from as copyFrom, to as copyTo } from 'pg-copy-streams';
import { EmbeddedPostgres } from '../../src/infrastructure/postgres/embedded-postgres';
import { migrate } from '../../src/infrastructure/postgres/migrator';
import { quietLogger } from './test-database';

/**
 * Backup and restore for tests, as an operator does it with pg_dump and
 * pg_restore: every table's rows and every sequence's position copied into a
 * fresh database, whose schema comes from our migrations (what a schema-only
 * restore creates). pg_dump itself cannot be used here: the PostgreSQL client
 * tools on the machine are older than the embedded server, and pg_dump
 * refuses a newer server. COPY is what pg_dump writes table data with.
 */

/** A second PostgreSQL cluster of its own (fresh initdb: its transaction ids start low). */
export interface SecondCluster {
  /** A server URL (database `postgres`). */
  url: string;
  stop(): Promise<void>;
}

export async function startSecondCluster(): Promise<SecondCluster> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-test-pg2-'));
  const pg = await EmbeddedPostgres.start(dir, quietLogger);
  return {
    url: pg.url,
    stop: async () => {
      await pg.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A snapshot of a database, held in memory: each table's COPY text and each sequence. */
export interface Dump {
  tables: Map<string, Buffer>;
  sequences: Map<string, { last: string; called: boolean }>;
}

/** Takes a dump of `url` in one repeatable-read snapshot, as pg_dump does. */
export async function dumpDatabase(url: string): Promise<Dump> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    await c.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const tables = new Map<string, Buffer>();
    const { rows } = await c.query<{ name: string }>(
      "SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' ORDER BY 1",
    );
    for (const { name } of rows) {
      const chunks: Buffer[] = [];
      const stream = c.query(copyTo(`COPY ${c.escapeIdentifier(name)} TO STDOUT`));
      for await (const chunk of stream) chunks.push(chunk as Buffer);
      tables.set(name, Buffer.concat(chunks));
    }
    const sequences = new Map<string, { last: string; called: boolean }>();
    const seqs = await c.query<{ name: string }>(
      "SELECT sequencename AS name FROM pg_sequences WHERE schemaname = 'public'",
    );
    for (const { name } of seqs.rows) {
      const s = await c.query<{ last_value: string; is_called: boolean }>(
        `SELECT last_value, is_called FROM ${c.escapeIdentifier(name)}`,
      );
      sequences.set(name, { last: s.rows[0].last_value, called: s.rows[0].is_called });
    }
    await c.query('COMMIT');
    return { tables, sequences };
  } finally {
    await c.end();
  }
}

/**
 * Restores `dump` into a new database `name` on the server at `serverUrl`
 * and returns its URL. Like starting kld on it, the migrator then runs once
 * more (which is when a restored log gets its next epoch).
 */
export async function restoreDatabase(
  dump: Dump,
  serverUrl: string,
  name: string,
): Promise<string> {
  const admin = new Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${admin.escapeIdentifier(name)}`);
  await admin.end();
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  const target = url.toString();
  await migrate(target, quietLogger);
  const c = new Client({ connectionString: target });
  await c.connect();
  try {
    await c.query('BEGIN');
    const names = [...dump.tables.keys()].map((t) => c.escapeIdentifier(t));
    await c.query(`TRUNCATE ${names.join(', ')}`);
    for (const [table, data] of dump.tables) {
      const sink = c.query(copyFrom(`COPY ${c.escapeIdentifier(table)} FROM STDIN`));
      await pipeline(async function* () {
        yield data;
      }, sink);
    }
    for (const [seq, { last, called }] of dump.sequences) {
      await c.query('SELECT setval($1::regclass, $2, $3)', [seq, last, called]);
    }
    await c.query('COMMIT');
  } finally {
    await c.end();
  }
  await migrate(target, quietLogger);
  return target;
}

/** The next transaction id of the cluster behind `url`. */
export async function nextTransactionId(url: string): Promise<bigint> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    const { rows } = await c.query<{ x: string }>(
      'SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS x',
    );
    return BigInt(rows[0].x);
  } finally {
    await c.end();
  }
}

/** Uses up transaction ids until the cluster behind `url` is at `at` or beyond. */
export async function advanceTransactionIds(url: string, at: bigint): Promise<void> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    // Each statement is a transaction of its own that takes an id.
    for (let next = await nextTransactionId(url); next < at; next++) {
      await c.query('SELECT pg_current_xact_id()');
    }
  } finally {
    await c.end();
  }
}
