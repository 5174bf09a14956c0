import { postgresSettings, printMachine, printRecords } from './support/report';
import { ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import pino from 'pino';
import { Client } from 'pg';
import { KilolockClient } from '../src/cli/kilolock-client';
import { PostgresEventStore } from '../src/infrastructure/event-store/postgres-event-store';
import { Database } from '../src/infrastructure/postgres/database';
import { freePort } from '../src/infrastructure/postgres/embedded-postgres';
import { Notifier } from '../src/infrastructure/postgres/notifier';
import { openBenchDatabase } from './support/bench-database';
import { benchEvent } from './support/events';
import { distribution, Distribution, formatInt, formatMs, verdict } from './support/stats';

/**
 * Event-feed benchmark (issue 13), against a real `kld` process:
 *
 * 1. Latency: 8 writers POST Terraform states (`POST /v1/states/<name>`) as
 *    fast as kld takes them; for every accepted POST, the time from sending
 *    it to its `ApplyCommitted` reaching a gRPC subscriber and an SSE
 *    subscriber. kld answers a POST only once its read models have the
 *    version, and subscribers usually have the event before that: so the
 *    time from the 200 would be 0, and the time from sending the POST (which
 *    includes deciding and committing it) is the figure, an upper bound. The peer is what a consumer without a feed does: poll
 *    `event_log` over SQL (every 250 ms, keyset on `cursor`), as a pull API
 *    is used.
 * 2. Catch-up: a gRPC `Read` of the whole log from position 0 (≥ 100,000
 *    events), in events per second, next to SSE and to the peer reading
 *    `event_log` straight from PostgreSQL in pages of 1,000.
 *
 * Prints figures next to the targets; never fails on a miss.
 *
 *   npm run bench:events
 *   KL_BENCH_DATABASE_URL=postgres://… (a server URL whose user may create databases)
 *   KL_BENCH_SECONDS=15 KL_BENCH_CATCHUP_EVENTS=200000
 */

const TARGET_P99_MS = 100;
const TARGET_CATCHUP_PER_S = 50_000;
const WRITERS = 8;
const SECONDS = intEnv('KL_BENCH_SECONDS', 15);
const CATCHUP_EVENTS = intEnv('KL_BENCH_CATCHUP_EVENTS', 100_000);
const POLL_MS = 250;
const ROOT = path.resolve(__dirname, '../..');
const KLD = path.join(ROOT, 'dist/src/kld.js');

const children = new Set<ChildProcess>();

async function main(): Promise<void> {
  const logger = pino({ level: process.env.KL_LOG_LEVEL ?? 'warn' }, pino.destination(2));
  const bench = await openBenchDatabase(logger);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-bench-events-'));
  const onSignal = () => {
    for (const c of children) c.kill('SIGKILL');
    void bench.close().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  let kld: Kld | undefined;
  try {
    printMachine();
    const settings = await postgresSettings(bench.url);
    console.log(`  postgres: ${settings.server_version} (${bench.origin})`);
    kld = await startKld(bench.url, tmp);
    console.log(`  kld        pid ${kld.pid}, HTTP ${kld.url}, gRPC ${kld.grpc}\n`);

    const latency = await measureLatency(kld, bench.url);
    console.log(
      `Latency: ${formatInt(latency.accepted)} POSTs accepted from ${WRITERS} writers in ${SECONDS} s ` +
        `(POST round trip p50 ${formatMs(latency.post.p50)} ms, p99 ${formatMs(latency.post.p99)} ms); ` +
        `from sending each POST to the subscriber receiving its ApplyCommitted:`,
    );
    const lat = (
      name: string,
      d: Distribution,
      missing: number,
      beforeAnswer: number,
      target: boolean,
    ) => ({
      subscriber: name,
      received: formatInt(d.count),
      missing: formatInt(missing),
      before: `${formatInt((100 * beforeAnswer) / Math.max(1, d.count))}%`,
      p50: formatMs(d.p50),
      p90: formatMs(d.p90),
      p99: formatMs(d.p99),
      max: formatMs(d.max),
      target: target ? `p99 ≤ ${TARGET_P99_MS} ms` : 'peer',
      result: target ? verdict(d.p99 <= TARGET_P99_MS && missing === 0) : '',
    });
    printRecords(
      {
        subscriber: 'subscriber',
        received: 'received',
        missing: 'missing',
        before: 'before the 200',
        p50: 'p50 ms',
        p90: 'p90 ms',
        p99: 'p99 ms',
        max: 'max ms',
        target: 'target',
        result: 'result',
      },
      [
        lat('gRPC Subscribe', latency.grpc, latency.missing.grpc, latency.beforeAnswer.grpc, true),
        lat('SSE GET /v1/events', latency.sse, latency.missing.sse, latency.beforeAnswer.sse, true),
        lat(
          `SQL poll of event_log every ${POLL_MS} ms`,
          latency.poll,
          latency.missing.poll,
          latency.beforeAnswer.poll,
          false,
        ),
      ],
    );

    const filled = await fillLog(bench.url, CATCHUP_EVENTS);
    await waitReady(kld.url);
    console.log(
      `\nCatch-up: the whole log from position 0 (${formatInt(filled.total)} events; ` +
        `${formatInt(filled.added)} appended for this in ${formatMs(filled.ms / 1000)} s):`,
    );
    const rows = [];
    for (const [name, read, target] of [
      ['gRPC Read', () => catchUpGrpc(kld!.grpc), true],
      ['SSE GET /v1/events?follow=false', () => catchUpSse(kld!.url), false],
      ['SQL: event_log in pages of 1,000 (peer)', () => catchUpSql(bench.url), false],
    ] as const) {
      const r = await read();
      const perS = r.events / (r.ms / 1000);
      rows.push({
        reader: name,
        events: formatInt(r.events),
        seconds: formatMs(r.ms / 1000),
        rate: formatInt(perS),
        target: target
          ? `≥ ${formatInt(TARGET_CATCHUP_PER_S)}/s`
          : name.includes('peer')
            ? 'peer'
            : '',
        result: target ? verdict(perS >= TARGET_CATCHUP_PER_S && r.events === filled.total) : '',
      });
    }
    printRecords(
      {
        reader: 'reader',
        events: 'events',
        seconds: 's',
        rate: 'events/s',
        target: 'target',
        result: 'result',
      },
      rows,
    );
  } finally {
    await kld?.stop();
    await bench.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

interface LatencyResult {
  accepted: number;
  post: Distribution;
  grpc: Distribution;
  sse: Distribution;
  poll: Distribution;
  missing: { grpc: number; sse: number; poll: number };
  beforeAnswer: { grpc: number; sse: number; poll: number };
}

/** `state-<name>` and serial of an ApplyCommitted: what a POST is recognised by. */
const keyOf = (stream: string, serial: unknown) => `${stream}#${String(serial)}`;

async function measureLatency(kld: Kld, databaseUrl: string): Promise<LatencyResult> {
  /** key → when the POST was sent, and when its 200 arrived. */
  const accepted = new Map<string, { sent: number; answered: number }>();
  const seen = {
    grpc: new Map<string, number>(),
    sse: new Map<string, number>(),
    poll: new Map<string, number>(),
  };
  const abort = new AbortController();

  const grpcCall = eventsClient(kld.grpc).Subscribe({ origin: 'ORIGIN_END' });
  const grpcReady = new Promise<void>((resolve, reject) => {
    grpcCall.on('data', (m: { event?: GrpcEvent; caught_up?: unknown }) => {
      if (m.caught_up) resolve();
      if (m.event?.type !== 'ApplyCommitted') return;
      const serial = (JSON.parse(m.event.data_json) as { serial: number }).serial;
      seen.grpc.set(keyOf(m.event.stream_id, serial), performance.now());
    });
    grpcCall.on('error', (err: grpc.ServiceError) => {
      if (err.code !== grpc.status.CANCELLED) reject(err);
    });
  });
  let sseReady!: () => void;
  const sseCaughtUp = new Promise<void>((r) => (sseReady = r));
  const sse = (async () => {
    const client = new KilolockClient(kld.url);
    for await (const m of client.events({ from: 'end', type: ['ApplyCommitted'] }, abort.signal)) {
      if (m.event === 'caught-up') sseReady();
      if (m.event !== undefined) continue;
      const e = JSON.parse(m.data) as { stream: string; data: { serial: number } };
      seen.sse.set(keyOf(e.stream, e.data.serial), performance.now());
    }
  })().catch((err: unknown) => {
    if (!abort.signal.aborted) throw err;
  });
  const pollLoop = pollEventLog(databaseUrl, seen.poll, abort.signal);
  await Promise.all([grpcReady, sseCaughtUp]);

  const post: number[] = [];
  const deadline = performance.now() + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: WRITERS }, async (_, w) => {
      const name = `bench/events/w${w}-${Date.now().toString(36)}`;
      for (let serial = 1; performance.now() < deadline; serial++) {
        const body = JSON.stringify({
          version: 4,
          terraform_version: '1.11.4',
          serial,
          lineage: `bench-${w}`,
          outputs: { serial: { value: serial, type: 'number' } },
          resources: [],
        });
        const sent = performance.now();
        const res = await fetch(`${kld.url}/v1/states/${name}`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body,
        });
        await res.arrayBuffer();
        const at = performance.now();
        if (res.status !== 200) throw new Error(`POST ${name} serial ${serial}: ${res.status}`);
        post.push(at - sent);
        accepted.set(keyOf(`state-${name}`, serial), { sent, answered: at });
      }
    }),
  );
  // Whatever has not arrived a few seconds after the last 200 counts as missing.
  const grace = performance.now() + 5000;
  while (
    performance.now() < grace &&
    Object.values(seen).some((m) => [...accepted.keys()].some((k) => !m.has(k)))
  ) {
    await new Promise((r) => setTimeout(r, 100));
  }
  abort.abort();
  grpcCall.cancel();
  await Promise.all([sse, pollLoop]);

  const lags = (m: Map<string, number>) => {
    const samples: number[] = [];
    let missing = 0;
    let beforeAnswer = 0;
    for (const [k, { sent, answered }] of accepted) {
      const got = m.get(k);
      if (got === undefined) {
        missing++;
        continue;
      }
      samples.push(got - sent);
      if (got <= answered) beforeAnswer++;
    }
    return { d: distribution(samples), missing, beforeAnswer };
  };
  const g = lags(seen.grpc);
  const s = lags(seen.sse);
  const p = lags(seen.poll);
  return {
    accepted: accepted.size,
    post: distribution(post),
    grpc: g.d,
    sse: s.d,
    poll: p.d,
    missing: { grpc: g.missing, sse: s.missing, poll: p.missing },
    beforeAnswer: { grpc: g.beforeAnswer, sse: s.beforeAnswer, poll: p.beforeAnswer },
  };
}

/** The peer: poll `event_log` for new ApplyCommitted events, keyset on cursor. */
async function pollEventLog(
  databaseUrl: string,
  seen: Map<string, number>,
  signal: AbortSignal,
): Promise<void> {
  const c = new Client({ connectionString: databaseUrl });
  await c.connect();
  try {
    const head = await c.query<{ cursor: string | null }>(
      'SELECT max(cursor) AS cursor FROM event_log',
    );
    let cursor = head.rows[0].cursor ?? '';
    while (!signal.aborted) {
      const { rows } = await c.query<{ cursor: string; stream: string; serial: string }>(
        `SELECT cursor, stream, data->>'serial' AS serial FROM event_log
          WHERE cursor > $1 AND type = 'ApplyCommitted' ORDER BY cursor`,
        [cursor],
      );
      const now = performance.now();
      for (const r of rows) {
        seen.set(keyOf(r.stream, r.serial), now);
        cursor = r.cursor;
      }
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  } finally {
    await c.end();
  }
}

/** Appends filler events (a lock's size, a type no projector reads) up to `total` in the log. */
async function fillLog(
  databaseUrl: string,
  total: number,
): Promise<{ total: number; added: number; ms: number }> {
  const db = new Database(databaseUrl);
  const notifier = new Notifier(databaseUrl);
  try {
    const store = new PostgresEventStore(db, notifier);
    const count = async () =>
      Number((await db.query<{ n: string }>('SELECT count(*) AS n FROM kl_events'))[0].n);
    const before = await count();
    const started = performance.now();
    let added = 0;
    for (let batch = 0; before + added < total; batch++) {
      const n = Math.min(1000, total - before - added);
      const events = Array.from({ length: n }, (_, i) => ({
        ...benchEvent(added + i),
        type: 'BenchFiller',
      }));
      await store.appendToStream(`bench-filler-${batch}`, events, {
        expectedRevision: 'no_stream',
      });
      added += n;
    }
    return { total: await count(), added, ms: performance.now() - started };
  } finally {
    await notifier.close();
    await db.close();
  }
}

async function catchUpGrpc(address: string): Promise<{ events: number; ms: number }> {
  const started = performance.now();
  let events = 0;
  const call = eventsClient(address).Read({ origin: 'ORIGIN_START' });
  await new Promise<void>((resolve, reject) => {
    call.on('data', (m: { event?: GrpcEvent }) => {
      if (m.event) events++;
    });
    call.on('end', resolve);
    call.on('error', reject);
  });
  return { events, ms: performance.now() - started };
}

async function catchUpSse(url: string): Promise<{ events: number; ms: number }> {
  const started = performance.now();
  let events = 0;
  for await (const m of new KilolockClient(url).events({ follow: false })) {
    if (m.event === undefined) events++;
  }
  return { events, ms: performance.now() - started };
}

async function catchUpSql(databaseUrl: string): Promise<{ events: number; ms: number }> {
  const c = new Client({ connectionString: databaseUrl });
  await c.connect();
  try {
    const started = performance.now();
    let events = 0;
    let cursor = '';
    for (;;) {
      const { rows } = await c.query<{ cursor: string }>(
        `SELECT cursor, position, stream, type, actor, occurred_at, event_id, data
           FROM event_log WHERE cursor > $1 ORDER BY cursor LIMIT 1000`,
        [cursor],
      );
      events += rows.length;
      if (rows.length < 1000) break;
      cursor = rows.at(-1)!.cursor;
    }
    return { events, ms: performance.now() - started };
  } finally {
    await c.end();
  }
}

interface GrpcEvent {
  type: string;
  stream_id: string;
  data_json: string;
}

type EventsClient = grpc.Client & {
  Subscribe(request: object): grpc.ClientReadableStream<Record<string, never>>;
  Read(request: object): grpc.ClientReadableStream<Record<string, never>>;
};

/** A client of kilolock.v1.Events from the repository's proto, as a consumer builds one. */
function eventsClient(address: string): EventsClient {
  const dir = path.join(ROOT, 'proto');
  const definition = protoLoader.loadSync(path.join(dir, 'kilolock/v1/events.proto'), {
    includeDirs: [dir],
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const v1 = (grpc.loadPackageDefinition(definition).kilolock as grpc.GrpcObject)
    .v1 as grpc.GrpcObject;
  const Events = v1.Events as grpc.ServiceClientConstructor;
  return new Events(address, grpc.credentials.createInsecure()) as unknown as EventsClient;
}

interface Kld {
  pid: number;
  url: string;
  grpc: string;
  stop(): Promise<void>;
}

/** `dist/src/kld.js serve` as its own process, as in production; waits for /readyz. */
async function startKld(databaseUrl: string, tmp: string): Promise<Kld> {
  const port = await freePort();
  const grpcPort = await freePort();
  const child = spawn(process.execPath, [KLD, 'serve', '--listen', `127.0.0.1:${port}`], {
    env: {
      ...process.env,
      KL_DATABASE_URL: databaseUrl,
      KL_DATA_DIR: path.join(tmp, 'kld'),
      KL_LOG_LEVEL: 'warn',
      KL_LOG_FORMAT: 'json',
      KL_GRPC_LISTEN: `127.0.0.1:${grpcPort}`,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let tail = '';
  const keep = (c: Buffer) => (tail = (tail + c.toString()).slice(-4000));
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      child.once('exit', () => {
        clearTimeout(timer);
        children.delete(child);
        resolve();
      });
      child.kill('SIGTERM');
    });
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitReady(url, () => {
      if (child.exitCode !== null) throw new Error(`kld exited (${child.exitCode}):\n${tail}`);
    });
  } catch (err) {
    await stop();
    throw err;
  }
  return { pid: child.pid!, url, grpc: `127.0.0.1:${grpcPort}`, stop };
}

/** Until /readyz answers 200 (read models caught up), 60 s at most. */
async function waitReady(url: string, check: () => void = () => undefined): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    check();
    try {
      if ((await fetch(`${url}/readyz`)).status === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`kld not ready within 60 s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function intEnv(name: string, fallback: number): number {
  const v = process.env[name];
  if (v === undefined || v === '') return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`${name} must be a positive integer`);
  return n;
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:events failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  for (const c of children) c.kill('SIGKILL');
  process.exit(1);
});
