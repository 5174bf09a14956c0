import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { Client } from 'pg';
import { KldServer, startServer } from '../../src/app/server';
import { KilolockClient } from '../../src/cli/kilolock-client';
import { loadConfig } from '../../src/infrastructure/config/config';
import { Notifier } from '../../src/infrastructure/postgres/notifier';
import { PostgresEventStore } from '../../src/infrastructure/event-store/postgres-event-store';
import {
  collectGrpc,
  collectSse,
  grpcEventsClient,
  GrpcMessage,
  SseMessage,
  unbatched,
} from '../support/event-clients';
import { createTestDatabase, quietLogger, TestDatabase } from '../support/test-database';

const document = (serial: number, lineage = 'lineage-1') =>
  JSON.stringify({
    version: 4,
    terraform_version: '1.11.4',
    serial,
    lineage,
    outputs: { n: { value: serial, type: 'number' } },
    resources: [],
  });

async function waitFor(what: string, ok: () => boolean, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const BIG = '123456789012345678901234567890';

const grpcEvents = (ms: GrpcMessage[]) => ms.filter((m) => m.kind === 'event');
const sseEvents = (ms: SseMessage[]) => ms.filter((m) => m.event === undefined);

describe('event subscriptions over gRPC and SSE', () => {
  let t: TestDatabase;
  let server: KldServer;
  let kl: KilolockClient;
  let rpc: ReturnType<typeof grpcEventsClient>;
  let notifier: Notifier;
  let store: PostgresEventStore;
  /** Every event of the log as gRPC delivered it: `<position> <event id>`. */
  let viaGrpc: string[] = [];

  beforeAll(async () => {
    t = await createTestDatabase();
    server = await startServer(
      loadConfig({
        KL_DATABASE_URL: t.url,
        KL_LISTEN: '127.0.0.1:0',
        KL_GRPC_LISTEN: '127.0.0.1:0',
      }),
      quietLogger,
    );
    kl = new KilolockClient(server.url);
    rpc = grpcEventsClient(server.grpcAddress!);
    notifier = new Notifier(t.url);
    store = new PostgresEventStore(t.db, notifier);
  });
  afterAll(async () => {
    rpc?.close();
    await server?.close();
    await notifier?.close();
    await t.drop();
  });

  const post = (state: string, body: string) =>
    fetch(`${server.url}/v1/states/${state}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Basic ${btoa('ci:')}` },
      body,
    }).then((r) => expect(r.status).toBe(200));

  /** What `kl query` lists: every event of the log, in cursor order. */
  async function listed(): Promise<string[]> {
    const { rows } = await kl.query({
      sql: 'SELECT cursor, event_id FROM event_log ORDER BY cursor',
      max_rows: 100_000,
    });
    return rows.map((r) => `${r[0]} ${r[1]}`);
  }

  it('both deliver exactly what event_log lists, in its order, under concurrent writers and late commits', async () => {
    const grpcLive = collectGrpc(rpc.Subscribe({ origin: 'ORIGIN_START' }));
    const sseLive = collectSse(server.url, { follow: true });
    await waitFor(
      'both caught up',
      () =>
        grpcLive.messages.some((m) => m.kind === 'caught_up') &&
        sseLive.messages.some((m) => m.event === 'caught-up'),
    );

    const late = new Client({ connectionString: t.url });
    const doomed = new Client({ connectionString: t.url });
    await late.connect();
    await doomed.connect();
    const insert = (stream: string) =>
      `INSERT INTO kl_events (event_id, stream_id, stream_revision, type, schema_version, data, metadata)
       VALUES (gen_random_uuid(), '${stream}', 0, 'BulkTick', 1, '{}', '{"actor":"held"}')`;
    try {
      await late.query('BEGIN');
      await late.query(insert('bulk-late'));
      await doomed.query('BEGIN');
      await doomed.query(insert('bulk-doomed'));
      await Promise.all([
        ...Array.from({ length: 16 }, async (_, w) => {
          let expected: bigint | 'no_stream' = 'no_stream';
          for (let batch = 0; batch < 10; batch++) {
            const r = await store.appendToStream(
              `bulk-${w}`,
              Array.from({ length: 50 }, (_, i) => ({
                eventId: randomUUID(),
                type: 'BulkTick',
                schemaVersion: 1,
                data: { w, n: batch * 50 + i },
                metadata: {
                  actor: `writer-${w}`,
                  correlationId: randomUUID(),
                  causationId: null,
                  occurredAt: new Date().toISOString(),
                },
              })),
              { expectedRevision: expected },
            );
            expected = r.nextExpectedRevision;
          }
        }),
      ]);
      await doomed.query('ROLLBACK');
      await late.query('COMMIT');
    } finally {
      await late.end();
      await doomed.end();
    }
    // And the product's own events, through terraform's HTTP backend; one
    // number a double cannot hold.
    await post(
      'team/a',
      document(1).replace('"outputs":{', `"outputs":{"big":{"value":${BIG},"type":"number"},`),
    );
    for (let serial = 2; serial <= 3; serial++) await post('team/a', document(serial));

    const log = await listed();
    expect(log.length).toBeGreaterThan(16 * 500);
    await waitFor(
      'gRPC to deliver the log',
      () => grpcEvents(grpcLive.messages).length >= log.length,
    );
    await waitFor('SSE to deliver the log', () => sseEvents(sseLive.messages).length >= log.length);
    await new Promise((r) => setTimeout(r, 300)); // nothing more may come
    viaGrpc = grpcEvents(grpcLive.messages).map((m) => `${m.position} ${m.event!.event_id}`);
    const viaSse = sseEvents(sseLive.messages).map((m) => {
      const e = JSON.parse(m.data) as { position: string; eventId: string };
      expect(m.id).toBe(e.position);
      return `${e.position} ${e.eventId}`;
    });
    expect(viaGrpc).toEqual(log);
    expect(viaSse).toEqual(log);
    expect(log.filter((l) => l.includes('bulk-doomed'))).toEqual([]);
    // Numbers arrive as written, not as doubles.
    const committed = (ms: { data: string }[]) => ms.find((m) => m.data.includes(BIG))?.data;
    expect(committed(sseEvents(sseLive.messages))).toContain(`"value":${BIG}`);
    const first = grpcEvents(grpcLive.messages).find((m) => m.event!.type === 'ApplyCommitted')!;
    expect(String(first.event!.data_json)).toContain(`"value":${BIG}`);
    expect(first.event).toMatchObject({
      stream_id: 'state-team/a',
      actor: 'ci',
      schema_version: 1,
    });
    await grpcLive.stop();
    await sseLive.stop();
  });

  it('a consumer restarted from its last position gets exactly the rest (gRPC from, SSE Last-Event-ID)', async () => {
    const saved = viaGrpc[4000].split(' ')[0];
    const rest = collectGrpc(rpc.Read({ from: saved }));
    await rest.done;
    expect(grpcEvents(rest.messages).map((m) => `${m.position} ${m.event!.event_id}`)).toEqual(
      viaGrpc.slice(4001),
    );
    expect(rest.messages.at(-1)).toEqual({
      kind: 'caught_up',
      position: viaGrpc.at(-1)!.split(' ')[0],
    });

    const res = await fetch(`${server.url}/v1/events?follow=false`, {
      headers: { 'Last-Event-ID': saved },
    });
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const ids = [...(await res.text()).matchAll(/^id: (.*)$/gm)].map((m) => m[1]);
    // The events, then the caught-up marker at the last of them.
    const positions = viaGrpc.slice(4001).map((l) => l.split(' ')[0]);
    expect(ids).toEqual([...positions, positions.at(-1)]);
  });

  it('filters by state and type, marks the switch to live, and checkpoints while nothing matches', async () => {
    const sub = collectGrpc(
      rpc.Subscribe({
        origin: 'ORIGIN_START',
        filter: { states: ['team/*'], types: ['ApplyCommitted'] },
        checkpoint_interval_ms: 100,
      }),
      (ms) => ms.at(-1)!.kind === 'checkpoint' && ms.some((m) => m.kind === 'caught_up'),
    );
    await waitFor('caught up', () => sub.messages.some((m) => m.kind === 'caught_up'));
    await store.appendToStream(
      'bulk-after',
      [
        {
          eventId: randomUUID(),
          type: 'BulkTick',
          schemaVersion: 1,
          data: {},
          metadata: {
            actor: 'x',
            correlationId: 'c',
            causationId: null,
            occurredAt: '2026-01-01T00:00:00Z',
          },
        },
      ],
      { expectedRevision: 'no_stream' },
    );
    await sub.done;
    // Catching up passes over thousands of other events: checkpoints may come
    // before the caught-up marker too, never out of order.
    const kinds = sub.messages.map((m) => m.kind);
    expect(kinds.filter((k) => k !== 'checkpoint')).toEqual([
      'event',
      'event',
      'event',
      'caught_up',
    ]);
    const positions = sub.messages.map((m) => m.position);
    expect([...positions].sort()).toEqual(positions);
    expect(sub.messages.filter((m) => m.kind === 'event').map((m) => m.event!.type)).toEqual([
      'ApplyCommitted',
      'ApplyCommitted',
      'ApplyCommitted',
    ]);
    const [head] = await listed().then((l) => l.slice(-1));
    expect(sub.messages.at(-1)!.position).toBe(head.split(' ')[0]);

    // SSE: the same filter, as query parameters.
    const res = await fetch(
      `${server.url}/v1/events?follow=false&state=team/a&type=ApplyCommitted,StateCreated`,
    );
    const types = [...(await res.text()).matchAll(/^data: (.*)$/gm)]
      .map((m) => JSON.parse(m[1]) as { type?: string })
      .flatMap((d) => (d.type ? [d.type] : []));
    expect(types).toEqual(['StateCreated', 'ApplyCommitted', 'ApplyCommitted', 'ApplyCommitted']);
  });

  it('refuses bad positions and unknown filters: INVALID_ARGUMENT over gRPC, 400 over HTTP', async () => {
    const refusal = async (request: object, read = false) => {
      const call = read ? rpc.Read(request) : rpc.Subscribe(request);
      const err = await collectGrpc(call).done.then(
        () => null,
        (e: grpc.ServiceError) => e,
      );
      return err && `${grpc.status[err.code]} ${err.details}`;
    };
    expect(await refusal({ from: 'yesterday' })).toMatch(
      /^INVALID_ARGUMENT EVENTS.INVALID_POSITION: "yesterday" is not a position/,
    );
    expect(
      await refusal({ from: `${'0'.repeat(15)}1-${'0'.repeat(15)}1`.replace(/^0/, '7') }, true),
    ).toMatch(
      /^INVALID_ARGUMENT EVENTS.INVALID_POSITION: position 7000000000000001-0000000000000001 is not in this log/,
    );
    expect(await refusal({ filter: { types: ['ApplyComitted'] } })).toMatch(
      /^INVALID_ARGUMENT EVENTS.INVALID_FILTER: unknown event type "ApplyComitted"/,
    );
    expect(await refusal({ checkpoint_interval_ms: 5 })).toMatch(
      /^INVALID_ARGUMENT REQUEST.INVALID: checkpoint_interval_ms is at least 100/,
    );

    for (const [query, code, message] of [
      ['from=yesterday', 'EVENTS.INVALID_POSITION', /^"yesterday" is not a position/],
      ['type=ApplyComitted', 'EVENTS.INVALID_FILTER', /^unknown event type "ApplyComitted"/],
      ['stream=nope-', 'EVENTS.INVALID_FILTER', /^stream prefix "nope-" matches no stream/],
      ['type=,', 'EVENTS.INVALID_FILTER', /^an empty type filter matches nothing$/],
      ['limit=0', 'REQUEST.INVALID', /^limit must be a whole number from 1 to 1000000000$/],
      ['limit=-3', 'REQUEST.INVALID', /^limit must be a whole number from 1 to 1000000000$/],
      ['heartbeat=301', 'REQUEST.INVALID', /^heartbeat must be a whole number from 1 to 300$/],
      ['checkpoint_ms=99', 'REQUEST.INVALID', /^checkpoint_ms must be a whole number from 100/],
      ['follow=maybe', 'REQUEST.INVALID', /^follow must be true or false$/],
      ['from=a&from=b', 'REQUEST.INVALID', /^from may be given once$/],
      ['since=yesterday', 'REQUEST.INVALID', /^since is not a known member$/],
    ] as const) {
      const res = await fetch(`${server.url}/v1/events?${query}`);
      expect(res.status).toBe(400);
      const { error } = (await res.json()) as { error: { code: string; message: string } };
      expect(error.code).toBe(code);
      expect(error.message).toMatch(message);
    }
    // Accepted spellings: comma lists, repeats, 1/0 flags.
    for (const query of [
      'follow=0&type=StateCreated,LockAcquired&type=LockReleased',
      'follow=false&limit=1',
    ]) {
      expect((await fetch(`${server.url}/v1/events?${query}`)).status).toBe(200);
    }
  });

  const lines = (ms: GrpcMessage[]) =>
    grpcEvents(unbatched(ms)).map((m) => `${m.position} ${m.event!.event_id}`);

  it('batched delivery (max_batch) sends the same events in the same order, and resumes from inside a batch', async () => {
    const log = await listed();
    const one = collectGrpc(rpc.Read({ origin: 'ORIGIN_START' }));
    const batched = collectGrpc(rpc.Read({ origin: 'ORIGIN_START', max_batch: 100 }));
    await Promise.all([one.done, batched.done]);
    expect(lines(batched.messages)).toEqual(log);
    // Message for message what a client without max_batch gets, markers included.
    expect(unbatched(batched.messages)).toEqual(one.messages);
    expect(batched.messages.at(-1)).toEqual({
      kind: 'caught_up',
      position: log.at(-1)!.split(' ')[0],
    });
    const sizes = batched.messages.filter((m) => m.kind === 'batch').map((m) => m.events!.length);
    expect(batched.messages.some((m) => m.kind === 'event')).toBe(false);
    expect(Math.max(...sizes)).toBe(100);
    expect(Math.min(...sizes)).toBeGreaterThan(0);

    // A consumer that saved the position of an event inside a batch gets exactly the rest.
    const inside = String(
      batched.messages.filter((m) => m.kind === 'batch')[3].events![41].position,
    );
    const at = log.findIndex((l) => l.startsWith(`${inside} `));
    expect(at).toBeGreaterThan(0);
    const rest = collectGrpc(rpc.Read({ from: inside, max_batch: 100 }));
    await rest.done;
    expect(lines(rest.messages)).toEqual(log.slice(at + 1));

    // A limit counts events, not messages.
    const limited = collectGrpc(rpc.Read({ origin: 'ORIGIN_START', max_batch: 100, limit: 250 }));
    const limitedOne = collectGrpc(rpc.Read({ origin: 'ORIGIN_START', limit: 250 }));
    await Promise.all([limited.done, limitedOne.done]);
    expect(unbatched(limited.messages)).toEqual(limitedOne.messages);
    expect(lines(limited.messages)).toEqual(log.slice(0, 250));

    const err = await collectGrpc(rpc.Subscribe({ max_batch: 1001 })).done.then(
      () => null,
      (e: grpc.ServiceError) => e,
    );
    expect(err && `${grpc.status[err.code]} ${err.details}`).toBe(
      'INVALID_ARGUMENT REQUEST.INVALID: max_batch is at most 1000 (0 or 1: no batches)',
    );
  });

  it('subscribers reading together, sharing pages and messages, each get the whole log once, in order', async () => {
    const log = await listed();
    const half = Math.floor(log.length / 2);
    const middle = log[half].split(' ')[0];
    // Eight in all: the most one caller may have at once.
    const readers = [0, 0, 1, 100, 1000, 1000].map((max_batch) =>
      collectGrpc(rpc.Read({ origin: 'ORIGIN_START', max_batch })),
    );
    const resumed = [0, 1000].map((max_batch) =>
      collectGrpc(rpc.Read({ from: middle, max_batch })),
    );
    await Promise.all([...readers, ...resumed].map((r) => r.done));

    for (const r of readers) expect(lines(r.messages)).toEqual(log);
    for (const r of resumed) expect(lines(r.messages)).toEqual(log.slice(half + 1));
    // One event a message, message for message the same, markers included.
    for (const r of readers.slice(1, 3)) expect(r.messages).toEqual(readers[0].messages);
    expect(readers[0].messages.every((m) => m.kind !== 'batch')).toBe(true);
  });

  it('batched subscriptions keep filters, the caught-up marker and checkpoints, then batch live events', async () => {
    const filtered = collectGrpc(
      rpc.Subscribe({
        origin: 'ORIGIN_START',
        filter: { states: ['team/*'], types: ['ApplyCommitted'] },
        max_batch: 50,
        checkpoint_interval_ms: 100,
      }),
    );
    const all = collectGrpc(rpc.Subscribe({ origin: 'ORIGIN_START', max_batch: 1000 }));
    await waitFor(
      'both caught up',
      () =>
        filtered.messages.some((m) => m.kind === 'caught_up') &&
        all.messages.some((m) => m.kind === 'caught_up'),
    );
    // Live: a burst that does not match the filter, then a version that does.
    await store.appendToStream(
      `bulk-burst-${randomUUID()}`,
      Array.from({ length: 300 }, (_, n) => ({
        eventId: randomUUID(),
        type: 'BulkTick',
        schemaVersion: 1,
        data: { n },
        metadata: {
          actor: 'x',
          correlationId: 'c',
          causationId: null,
          occurredAt: '2026-01-01T00:00:00Z',
        },
      })),
      { expectedRevision: 'no_stream' },
    );
    await post('team/a', document(4));
    const log = await listed();
    await waitFor('the whole log', () => lines(all.messages).length >= log.length);
    await waitFor('the live version', () => grpcEvents(unbatched(filtered.messages)).length >= 4);
    await new Promise((r) => setTimeout(r, 300)); // nothing more may come
    await Promise.all([filtered.stop(), all.stop()]);

    expect(lines(all.messages)).toEqual(log);
    const kinds = unbatched(filtered.messages).map((m) => m.kind);
    expect(kinds.filter((k) => k !== 'checkpoint')).toEqual([
      'event',
      'event',
      'event',
      'caught_up',
      'event',
    ]);
    const events = grpcEvents(unbatched(filtered.messages)).map((m) => m.event!);
    expect(events.map((e) => `${e.stream_id} ${e.type}`)).toEqual(
      Array(4).fill('state-team/a ApplyCommitted'),
    );
    expect(
      events.map((e) => (JSON.parse(String(e.data_json)) as { serial: number }).serial),
    ).toEqual([1, 2, 3, 4]);
    const positions = filtered.messages.map((m) => m.position);
    expect([...positions].sort()).toEqual(positions);
  });

  it('splits a batch whose JSON would outgrow a client’s 4 MiB message limit', async () => {
    const head = (await listed()).at(-1)!.split(' ')[0];
    const big = 'x'.repeat(100_000);
    await store.appendToStream(
      `bulk-big-${randomUUID()}`,
      Array.from({ length: 60 }, (_, n) => ({
        eventId: randomUUID(),
        type: 'BulkTick',
        schemaVersion: 1,
        data: { n, big },
        metadata: {
          actor: 'x',
          correlationId: 'c',
          causationId: null,
          occurredAt: '2026-01-01T00:00:00Z',
        },
      })),
      { expectedRevision: 'no_stream' },
    );
    const read = collectGrpc(rpc.Read({ from: head, max_batch: 1000 }));
    await read.done;
    const batches = read.messages.filter((m) => m.kind === 'batch');
    expect(batches.length).toBeGreaterThan(1);
    const data = grpcEvents(unbatched(read.messages)).map(
      (m) => JSON.parse(String(m.event!.data_json)) as { n: number; big: string },
    );
    expect(data.map((d) => d.n)).toEqual(Array.from({ length: 60 }, (_, n) => n));
    expect(data.every((d) => d.big === big)).toBe(true);
  });
});
