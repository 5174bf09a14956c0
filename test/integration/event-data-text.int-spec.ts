import { wholeLog } from '../support/whole-log';
import { randomUUID } from 'node:crypto';
import * as path from 'node:path';
import * as protobuf from 'protobufjs';
import { EventFeed } from '../../src/application/events/event-feed';
import { EventFilter } from '../../src/application/events/event-filter';
import type { EventToAppend } from '../../src/application/ports/event-store.port';
import { LOG_START, LoggedEvent, RecordedEvent } from '../../src/domain/shared/event';
import { formatCursor } from '../../src/domain/shared/log-cursor';
import { Upcasters } from '../../src/domain/shared/upcasting';
import { parseJsonLossless, stringifyJson } from '../../src/domain/terraform/lossless-json';
import { PostgresEventStore } from '../../src/infrastructure/event-store/postgres-event-store';
import { dataJson, eventJson } from '../../src/infrastructure/events/event-json';
import { encodeBatches, encodeEvent } from '../../src/infrastructure/grpc/event-message-encoding';
import { useEventStoreDatabase } from '../support/event-store-database';

/**
 * The event feed reads data as the stored JSON text and passes it on
 * unparsed (readLog), and writes gRPC messages without protobufjs. What a
 * consumer gets must be what the parsed path gave: the events readAll
 * parses, as SSE's JSON and as the protobufjs encoding of the message
 * objects the gRPC server built from them before.
 */
describe('delivering stored data text', () => {
  const env = useEventStoreDatabase();

  // Version 2 of LockNoted renamed `who` to `holder`.
  const upcasters = new Upcasters([
    { type: 'LockNoted', from: 1, upcast: (d) => ({ holder: (d as { who: string }).who }) },
  ]);

  const metadata = (i: number) => ({
    actor: i % 2 ? 'ci@example.com' : 'ünïcødé 😀 "quoted" \\ back',
    correlationId: randomUUID(),
    causationId: i % 3 ? null : randomUUID(),
    occurredAt: `2026-01-0${1 + (i % 9)}T00:00:00.000Z`,
  });
  const event = (type: string, data: unknown, schemaVersion = 1, i = 0): EventToAppend => ({
    eventId: randomUUID(),
    type,
    schemaVersion,
    data,
    metadata: metadata(i),
  });
  // A state's big numbers reach the store marked, as a parsed document holds them.
  const bigNumbers = parseJsonLossless(
    '{"serial":123456789012345678901234567890,"tiny":1e-400,"huge":-4.5e+308,"pi":3.14159,' +
      '"exact":9007199254740993,"list":[12345678901234567890,0.1,-0,1e21]}',
  );
  const mix = (run: string): EventToAppend[] => [
    event('StateCreated', { stateId: randomUUID(), stateName: `team/${run}` }),
    event('LockAcquired', {
      text: 'é€😀 tab\t newline\n nul\u0000 quote" backslash\\ slash/ \u2028\u2029 \ud83d',
      'key with "quotes"': { '': [], nested: [{}, null, true, false] },
      '10': 'integer-like keys',
      '2': 'come first',
      special: JSON.parse('{"__proto__":"an own key","a":1}') as unknown,
    }),
    event('ApplyCommitted', bigNumbers),
    event('LockNoted', { who: 'alice' }, 1, 1),
    event('LockNoted', { holder: 'bob' }, 2, 2),
    event('LockReleased', null),
    event('Tick', [1, 'two', { three: 3.5 }], 1, 3),
    event('Tick', 'just a string', 1, 4),
  ];

  it('readLog gives the events readAll gives, with the stored text where nothing upcast them', async () => {
    const store = new PostgresEventStore(env.t.db, env.notifier, upcasters);
    const run = randomUUID();
    const written = mix(run);
    await store.appendToStream(`mix-${run}`, written, { expectedRevision: 'no_stream' });
    // Written by SQL, not by kld: metadata that lacks fields, or holds a number.
    const bySql = [randomUUID(), randomUUID()];
    await env.t.db.query(
      `INSERT INTO kl_events (event_id, stream_id, stream_revision, type, schema_version, data, metadata)
       VALUES ($1, $3, 0, 'BulkTick', 1, '{}', '{"actor":"held"}'),
              ($2, $3, 1, 'BulkTick', 1, '[]', '{"actor":5,"occurredAt":null}')`,
      [...bySql, `sql-${run}`],
    );
    const ids = [...written.map((e) => e.eventId), ...bySql];

    const parsed = (await wholeLog(store, () => store.readAll(LOG_START, 1000))).filter((e) =>
      e.streamId.endsWith(run),
    );
    const text = (await wholeLog(store, () => store.readLog(LOG_START, 1000))).filter((e) =>
      e.streamId.endsWith(run),
    );
    expect(text.map((e) => e.eventId)).toEqual(ids);
    expect(parsed.map((e) => e.eventId)).toEqual(ids);

    // The pass-through is taken for all but the upcast event (which has its new shape).
    expect(text.map((e) => e.dataJson !== undefined)).toEqual([
      ...written.map((e) => !(e.type === 'LockNoted' && e.schemaVersion === 1)),
      true,
      true,
    ]);
    expect(text[3].schemaVersion).toBe(2);
    expect(text[3].data).toEqual({ holder: 'alice' });

    for (const [i, e] of text.entries()) {
      const p = parsed[i];
      // The same event, field by field, data included (parsed on demand).
      expect(plain(e)).toEqual(plain(p));
      // Byte for byte what the parsed path delivers.
      expect(dataJson(e)).toBe(stringifyJson(p.data));
      expect(eventJson(e)).toBe(eventJson(p));
      expect(encodeEvent(e).equals(protobufjsMessage({ event: referenceMessage(p) }))).toBe(true);
    }
    expect(dataJson(text[2])).toContain('"serial":123456789012345678901234567890');
    expect(dataJson(text[2])).toContain('"tiny":1e-400');

    // A batch, and a batch split by size: the same bytes protobufjs writes.
    const [batch] = encodeBatches(text, 1 << 20).messages;
    expect(
      batch.equals(protobufjsMessage({ batch: { events: parsed.map(referenceMessage) } })),
    ).toBe(true);
    const split = encodeBatches(text, 200).messages;
    expect(split.length).toBeGreaterThan(1);
    const decoded = split.flatMap(
      (b) => (EventMessage.toObject(EventMessage.decode(b), DECODE) as Batch).batch.events,
    );
    expect(decoded).toEqual(
      parsed
        .map((p) =>
          EventMessage.toObject(
            EventMessage.decode(protobufjsMessage({ event: referenceMessage(p) })),
            DECODE,
          ),
        )
        .map((m) => (m as { event: unknown }).event),
    );
  });

  it('a copy of an event read as text carries no stale text', async () => {
    const store = new PostgresEventStore(env.t.db, env.notifier, new Upcasters([]));
    const run = randomUUID();
    await store.appendToStream(`copy-${run}`, [event('Tick', { n: 1 })], {
      expectedRevision: 'no_stream',
    });
    const [e] = (await wholeLog(store, () => store.readLog(LOG_START, 1000))).filter((x) =>
      x.streamId.endsWith(run),
    );
    expect(e.dataJson).toBe('{"n":1}');
    const copy: LoggedEvent = { ...e, data: { n: 2 } };
    expect(copy.dataJson).toBeUndefined();
    expect(dataJson(copy)).toBe('{"n":2}');
  });

  it('the feed delivers what readAll lists, upcast, through SSE JSON', async () => {
    const store = new PostgresEventStore(env.t.db, env.notifier, upcasters);
    const run = randomUUID();
    await store.appendToStream(`feed-${run}`, mix(run), { expectedRevision: 'no_stream' });
    const parsed = (await wholeLog(store, () => store.readAll(LOG_START, 1000))).filter((e) =>
      e.streamId.endsWith(run),
    );
    const feed = new EventFeed(store);
    const abort = new AbortController();
    const giveUp = setTimeout(() => abort.abort(), 30_000);
    const delivered: string[] = [];
    try {
      for await (const item of await feed.open(
        { from: 'start', filter: EventFilter.compile({ states: [`team/${run}`] }), follow: true },
        abort.signal,
      )) {
        if (item.kind === 'events') throw new Error('no batches were asked for');
        if (item.kind === 'event') delivered.push(eventJson(item.event));
        if (delivered.length === parsed.length) break;
      }
    } finally {
      clearTimeout(giveUp);
      await feed.close();
    }
    // The state filter needed the first event's data (its state name): parsed from the text.
    expect(delivered).toEqual(parsed.map((p) => eventJson(p)));
  });
});

// A database of its own: its 1,000-event append would push the log past
// what the tests above read from its start in one page.
describe('stored data text PostgreSQL compressed', () => {
  const env = useEventStoreDatabase();

  it('keeps the text of an event PostgreSQL stored compressed, by INSERT and by COPY', async () => {
    // PostgreSQL compresses (pglz) a `data` value of a row over about 2 KB:
    // an instance with big attributes. What it gives back must be the text
    // written, byte for byte (the log's WAL is mostly these rows:
    // docs/performance-history.md, "The WAL of a big commit (wave 26)").
    const store = new PostgresEventStore(env.t.db, env.notifier, new Upcasters([]));
    const instance = (i: number) => ({
      address: `aws_instance.web[${i}]`,
      attributes: {
        user_data: 'echo nul\u0000 tab\t é€😀 "quoted" \\ \u2028 '.repeat(40),
        tags: Object.fromEntries(Array.from({ length: 40 }, (_, k) => [`k${k}`, `v${k % 3}`])),
      },
    });
    for (const count of [3, 1000]) {
      const run = randomUUID();
      const events = Array.from({ length: count }, (_, i) => ({
        eventId: randomUUID(),
        type: 'LifecycleOpened',
        schemaVersion: 1,
        data: i % 100 === 0 ? instance(i) : { n: i },
        metadata: {
          actor: 'ci@example.com',
          correlationId: randomUUID(),
          causationId: null,
          occurredAt: '2026-01-01T00:00:00.000Z',
        },
      }));
      await store.appendToStream(`compressed-${run}`, events, { expectedRevision: 'no_stream' });
      const rows = await env.t.db.query<{ text: string; compression: string | null }>(
        `SELECT data::text AS text, pg_column_compression(data) AS compression
           FROM kl_events WHERE stream_id = $1 ORDER BY stream_revision`,
        [`compressed-${run}`],
      );
      expect(rows.map((r) => r.text)).toEqual(events.map((e) => JSON.stringify(e.data)));
      const big = rows.filter((_, i) => i % 100 === 0);
      expect(big.every((r) => r.compression === 'pglz')).toBe(true);
      expect(big[0].text).toContain('nul\\u0000 tab\\t');
      const read = (await wholeLog(store, () => store.readLog(LOG_START, 2000))).filter((e) =>
        e.streamId.endsWith(run),
      );
      expect(read.map((e) => dataJson(e))).toEqual(rows.map((r) => r.text));
    }
  });
});

const root = new protobuf.Root().loadSync(
  path.join(__dirname, '../../proto/kilolock/v1/events.proto'),
  { keepCase: true },
);
const EventMessage = root.lookupType('kilolock.v1.EventMessage');
const DECODE = { longs: String, defaults: true, oneofs: false };
type Batch = { batch: { events: unknown[] } };

function protobufjsMessage(message: object): Buffer {
  return Buffer.from(EventMessage.encode(EventMessage.fromObject(message)).finish());
}

/** The Event message object the gRPC server built from a parsed event before. */
function referenceMessage(event: RecordedEvent): Record<string, string | number> {
  const { metadata } = event;
  return {
    position: formatCursor(event.position),
    stream_id: event.streamId,
    stream_revision: event.streamRevision.toString(),
    type: event.type,
    event_id: event.eventId,
    occurred_at: metadata.occurredAt,
    actor: metadata.actor,
    correlation_id: metadata.correlationId,
    causation_id: metadata.causationId ?? '',
    schema_version: event.schemaVersion,
    data_json: stringifyJson(event.data),
    metadata_json: stringifyJson(metadata),
  };
}

function plain(e: RecordedEvent): Record<string, unknown> {
  return {
    eventId: e.eventId,
    type: e.type,
    schemaVersion: e.schemaVersion,
    data: e.data,
    metadata: e.metadata,
    streamId: e.streamId,
    streamRevision: e.streamRevision,
    position: e.position,
  };
}
