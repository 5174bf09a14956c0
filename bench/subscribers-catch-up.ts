import type { ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import pino from 'pino';
import { type BenchDatabase, openBenchDatabase } from './support/bench-database';
import { fillLog } from './support/fill-log';
import { KldProcess, startKld, waitReady } from './support/kld-process';
import { processCpuMs } from './support/process-cpu';
import { printMachine, printRecords } from './support/report';
import { formatInt, formatMs } from './support/stats';

/**
 * What subscribers catching up together cost kld: 1 and then
 * KL_BENCH_SUBSCRIBERS (8) subscribers at once read the whole log from its
 * start (KL_BENCH_EVENTS filler events, 20,000), over gRPC `Read` with
 * max_batch 1000, gRPC `Read` one event per message, and SSE
 * (`follow=false`). Printed: kld's CPU (/proc) per 1,000 events delivered
 * (over all subscribers) and the wall time until the last subscriber is
 * done, median and range over KL_BENCH_ROUNDS (3) rounds after one not
 * counted. The clients only
 * count events (gRPC messages undecoded, SSE frames unparsed), so the
 * bench's own CPU stays small beside kld's; each subscriber must get every
 * event, or the bench fails. This build and KL_BENCH_KLD_BEFORE (another
 * build's dist/src/kld.js), each on its own kld and database, take turns.
 * KL_BENCH_READERS=gRPC,SSE: only the readers whose names start so.
 *
 *   npm run build && KL_UNLOGGED_READ_MODELS=on node dist/bench/subscribers-catch-up.js
 */

const EVENTS = Number(process.env.KL_BENCH_EVENTS ?? 20_000);
const SUBSCRIBERS = Number(process.env.KL_BENCH_SUBSCRIBERS ?? 8);
const ROUNDS = Number(process.env.KL_BENCH_ROUNDS ?? 3);
const ROOT = path.resolve(__dirname, '../..');

const children = new Set<ChildProcess>();

interface Build {
  name: string;
  kld: KldProcess;
  database: BenchDatabase;
}

type Reader = (build: Build) => Promise<number>;

const only = (process.env.KL_BENCH_READERS ?? '').split(',').filter(Boolean);
const readers = (
  [
    ['gRPC max_batch 1000', (b) => readGrpc(b.kld.grpc!, 1000)],
    ['gRPC one event a message', (b) => readGrpc(b.kld.grpc!, 0)],
    ['SSE', (b) => readSse(b.kld.url)],
  ] satisfies [string, Reader][]
).filter(([name]) => only.length === 0 || only.some((o) => name.startsWith(o)));

async function main(): Promise<void> {
  const logger = pino({ level: 'warn' }, pino.destination(2));
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-bench-subscribers-'));
  const kldOf: [string, string][] = [['this', path.join(ROOT, 'dist/src/kld.js')]];
  if (process.env.KL_BENCH_KLD_BEFORE) kldOf.push(['before', process.env.KL_BENCH_KLD_BEFORE]);
  const builds: Build[] = [];
  try {
    printMachine();
    for (const [name, kld] of kldOf) {
      const database = await openBenchDatabase(logger);
      builds.push({ name, database, kld: null as unknown as KldProcess });
      await fillLog(database.url, EVENTS);
      builds.at(-1)!.kld = await startKld({
        kld,
        databaseUrl: database.url,
        dataDir: path.join(tmp, name),
        grpc: true,
        children,
      });
      await waitReady(builds.at(-1)!.kld.url);
    }
    console.log(
      `${formatInt(EVENTS)} events in each log; 1 and ${SUBSCRIBERS} subscribers from the start, ` +
        `${ROUNDS} rounds, builds in turns\n`,
    );
    // A first read of each kind, not counted, for V8 to compile kld's paths.
    for (const build of builds) for (const [, read] of readers) await read(build);
    const figures = new Map<string, { cpu: number[]; wallMs: number[] }>();
    for (let round = 0; round < ROUNDS; round++) {
      for (const build of builds) {
        for (const [mode, read] of readers) {
          for (const n of [1, SUBSCRIBERS]) {
            const cpuBefore = processCpuMs(build.kld.pid);
            const started = performance.now();
            const got = await Promise.all(Array.from({ length: n }, () => read(build)));
            const wallMs = performance.now() - started;
            const cpuMs = processCpuMs(build.kld.pid) - cpuBefore;
            const short = got.filter((events) => events !== EVENTS);
            if (short.length > 0) {
              throw new Error(`${build.name} ${mode}: subscribers got ${short.join(', ')} events`);
            }
            const key = `${build.name}\t${mode}\t${n}`;
            const f = figures.get(key) ?? { cpu: [], wallMs: [] };
            f.cpu.push((1000 * cpuMs) / (n * EVENTS));
            f.wallMs.push(wallMs);
            figures.set(key, f);
          }
        }
      }
    }
    const spread = (xs: number[], format: (x: number) => string) => {
      const s = [...xs].sort((a, b) => a - b);
      return `${format(s[Math.floor((s.length - 1) / 2)])} (${format(s[0])}–${format(s.at(-1)!)})`;
    };
    printRecords(
      {
        mode: 'reader',
        n: 'subscribers',
        build: 'build',
        cpu: 'kld CPU ms / 1,000 events: median (range)',
        wall: 'wall s: median (range)',
      },
      [...figures].map(([key, f]) => {
        const [build, mode, n] = key.split('\t');
        return {
          mode,
          n,
          build,
          cpu: spread(f.cpu, (x) => x.toFixed(2)),
          wall: spread(f.wallMs, (x) => formatMs(x / 1000)),
        };
      }),
    );
    console.log(
      `  (load ${os
        .loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')})`,
    );
  } finally {
    for (const b of builds) {
      await b.kld?.stop();
      await b.database.close();
    }
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** Events in one EventMessage's bytes: an event (field 1) or a batch (field 4) of them. */
function eventsIn(message: Buffer): number {
  if (message[0] === 0x0a) return 1;
  if (message[0] !== 0x22) return 0;
  let at = 1;
  const varint = () => {
    let v = 0;
    for (let shift = 1; ; shift *= 128) {
      const b = message[at++];
      v += (b & 0x7f) * shift;
      if (b < 0x80) return v;
    }
  };
  const end = varint() + at;
  let n = 0;
  while (at < end) {
    at++; // EventBatch.events' tag
    const size = varint();
    at += size;
    n++;
  }
  return n;
}

/** A kilolock.v1.Events client that hands over each message's bytes undecoded. */
function rawEventsClient(address: string): grpc.Client & {
  Read(request: object): grpc.ClientReadableStream<Buffer>;
} {
  const dir = path.join(ROOT, 'proto');
  const definition = protoLoader.loadSync(path.join(dir, 'kilolock/v1/events.proto'), {
    includeDirs: [dir],
    keepCase: true,
    defaults: true,
    oneofs: true,
  });
  const v1 = (grpc.loadPackageDefinition(definition).kilolock as grpc.GrpcObject)
    .v1 as grpc.GrpcObject;
  const service = (v1.Events as grpc.ServiceClientConstructor).service;
  const raw = Object.fromEntries(
    Object.entries(service).map(([name, m]) => [
      name,
      { ...m, responseDeserialize: (b: Buffer) => b },
    ]),
  );
  const Client = grpc.makeGenericClientConstructor(raw, 'Events');
  // Each subscriber on its own connection, as separate consumers are.
  return new Client(address, grpc.credentials.createInsecure(), {
    'grpc.use_local_subchannel_pool': 1,
    'grpc.max_receive_message_length': -1,
  }) as unknown as ReturnType<typeof rawEventsClient>;
}

async function readGrpc(address: string, maxBatch: number): Promise<number> {
  const client = rawEventsClient(address);
  let events = 0;
  try {
    const call = client.Read({ origin: 'ORIGIN_START', max_batch: maxBatch });
    await new Promise<void>((resolve, reject) => {
      call.on('data', (m: Buffer) => (events += eventsIn(m)));
      call.on('end', resolve);
      call.on('error', reject);
    });
  } finally {
    client.close();
  }
  return events;
}

async function readSse(url: string): Promise<number> {
  const res = await fetch(`${url}/v1/events?follow=false`);
  if (!res.ok || !res.body) throw new Error(`GET /v1/events: ${res.status}`);
  // Frames end with a blank line; markers name an event type, events do not.
  let frames = 0;
  let markers = 0;
  let carry = '';
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    const text = carry + Buffer.from(chunk).toString('latin1');
    const last = text.lastIndexOf('\n\n');
    const end = last === -1 ? 0 : last + 2;
    // The frame not ended yet waits for the next chunk.
    carry = text.slice(end);
    for (let i = text.indexOf('\n\n'); i !== -1 && i < end; i = text.indexOf('\n\n', i + 2)) {
      frames++;
    }
    for (
      let i = text.indexOf('\nevent: ');
      i !== -1 && i < end;
      i = text.indexOf('\nevent: ', i + 8)
    ) {
      markers++;
    }
  }
  return frames - markers;
}

main().catch((err: unknown) => {
  process.stderr.write(
    `subscribers-catch-up failed: ${err instanceof Error ? err.stack : String(err)}\n`,
  );
  for (const c of children) c.kill('SIGKILL');
  process.exit(1);
});
