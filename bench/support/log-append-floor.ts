import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Client } from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import pino from 'pino';
import { EmbeddedPostgres } from '../../src/infrastructure/postgres/embedded-postgres';
import { generateBigState } from './big-state-generator';
import { formatMs } from './stats';

/**
 * Probe: what PostgreSQL alone spends writing a first commit's log, two
 * ways, in turns on one embedded server (each into a fresh table, in one
 * transaction, committed): the event model's (one json row per instance,
 * each the instance's JSON with its address and hash, sent with COPY as the
 * event store does) and a log holding the document as one json value (one
 * row, compressed as PostgreSQL does by default, not compressed, and as
 * text, which PostgreSQL does not parse). Per way the wall time and the backend's CPU (10 ms ticks), min and
 * median. Not kld's event table (no indexes, no metadata): the floor of the
 * rows' JSON input and their WAL. The event rows also into an UNLOGGED table
 * (no WAL) and with `synchronous_commit = off` (no wait for the WAL's flush),
 * bench-only bounds of what the rows' WAL costs.
 *
 *   npm run build && node dist/bench/support/log-append-floor.js
 *   KL_PROBE_INSTANCES=20000  KL_PROBE_ROUNDS=5
 */

const INSTANCES = Number(process.env.KL_PROBE_INSTANCES ?? 20_000);
const ROUNDS = Number(process.env.KL_PROBE_ROUNDS ?? 5);

interface Doc {
  resources: { type: string; name: string; instances: { attributes?: unknown }[] }[];
}

function backendMs(pid: number): number {
  const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
}

async function main(): Promise<void> {
  const logger = pino({ level: 'warn' }, pino.destination(2));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-log-floor-'));
  const pg = await EmbeddedPostgres.start(dir, logger);
  const client = new Client({ connectionString: pg.url });
  try {
    await client.connect();
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const pid = rows[0].pid;
    const text = generateBigState({ size: Math.round((INSTANCES - 8) / 2) }).text;
    const doc = JSON.parse(text) as Doc;
    const lines: string[] = [];
    for (const r of doc.resources) {
      for (const [i, instance] of r.instances.entries()) {
        const event = JSON.stringify({
          stateId: '00000000-0000-4000-8000-000000000000',
          version: 1,
          serial: 1,
          address: `${r.type}.${r.name}[${i}]`,
          hash: 'f'.repeat(64),
          resource: { type: r.type, name: r.name },
          instance,
        });
        // COPY's text format: a backslash stands for itself doubled.
        lines.push(event.replaceAll('\\', '\\\\'));
      }
    }
    const body = Buffer.from(lines.join('\n') + '\n');
    const times: Record<string, { ms: number; cpu: number }[]> = {
      events: [],
      'events, UNLOGGED table': [],
      'events, synchronous_commit off': [],
      document: [],
      'document, not compressed': [],
      'document as text, not compressed': [],
    };
    const ways = Object.keys(times);
    console.log(
      `${lines.length} event rows (${(body.length / 2 ** 20).toFixed(1)} MiB) against one ` +
        `document row (${(text.length / 2 ** 20).toFixed(1)} MiB), ${ROUNDS} rounds, load ${os.loadavg()[0].toFixed(1)}`,
    );
    for (let round = 0; round < ROUNDS; round++) {
      for (const [i] of ways.entries()) {
        const way = ways[(i + round) % ways.length];
        const table = `floor_${i}_${round}`;
        const type = way.includes('as text') ? 'text' : 'json';
        const unlogged = way.includes('UNLOGGED') ? 'UNLOGGED' : '';
        await client.query(
          `CREATE ${unlogged} TABLE ${table} (id bigserial PRIMARY KEY, data ${type} NOT NULL)`,
        );
        // EXTERNAL: out of line but never compressed.
        if (way.endsWith('not compressed')) {
          await client.query(`ALTER TABLE ${table} ALTER COLUMN data SET STORAGE EXTERNAL`);
        }
        const t0 = performance.now();
        const c0 = backendMs(pid);
        await client.query('BEGIN');
        if (way.includes('synchronous_commit off')) {
          await client.query('SET LOCAL synchronous_commit = off');
        }
        if (way.startsWith('events')) {
          await pipeline(
            Readable.from([body]),
            client.query(copyFrom(`COPY ${table} (data) FROM STDIN`)),
          );
        } else {
          await client.query(`INSERT INTO ${table} (data) VALUES ($1::${type})`, [text]);
        }
        await client.query('COMMIT');
        times[way].push({ ms: performance.now() - t0, cpu: backendMs(pid) - c0 });
      }
    }
    for (const [way, xs] of Object.entries(times)) {
      const sorted = (f: (x: { ms: number; cpu: number }) => number) =>
        xs.map(f).sort((a, b) => a - b);
      const ms = sorted((x) => x.ms);
      const cpu = sorted((x) => x.cpu);
      const mid = Math.floor(xs.length / 2);
      console.log(
        `  ${way.padEnd(33)} wall min ${formatMs(ms[0])} / median ${formatMs(ms[mid])} ms, ` +
          `backend CPU min ${formatMs(cpu[0])} / median ${formatMs(cpu[mid])} ms`,
      );
    }
  } finally {
    await client.end().catch(() => undefined);
    await pg.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
