import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { useEventStoreDatabase } from '../../../test/support/event-store-database';
import type { AppendInFlight, EventToAppend } from '../../application/ports/event-store.port';
import { LOG_START, LogPosition } from '../../domain/shared/event';
import { PostgresEventStore } from './postgres-event-store';

const metadata = {
  actor: 'alice',
  correlationId: 'c-1',
  causationId: null,
  occurredAt: '2026-01-01T00:00:00.000Z',
};

/** Events whose data carries what JSON and COPY make awkward. */
function events(n: number, type = (i: number) => (i % 3 === 0 ? 'Opened' : 'Closed')) {
  return Array.from({ length: n }, (_, i): EventToAppend => ({
    eventId: randomUUID(),
    type: type(i),
    schemaVersion: 1,
    data: {
      i,
      text: `tab\there\nline \\ back \\N ${'é'.repeat(i % 4)}`,
      nested: { list: [1, 2.5, null, true, 'x'], big: '\uF8FE\uF8FD#12345678901234567890' },
    },
    metadata,
  }));
}

/** Polls until `read` returns something (a test database may hold an old transaction a moment). */
async function eventually<T>(read: () => Promise<T[]>): Promise<T[]> {
  let got = await read();
  for (const deadline = Date.now() + 15_000; got.length === 0 && Date.now() < deadline;) {
    await new Promise((r) => setTimeout(r, 50));
    got = await read();
  }
  return got;
}

describe('PostgreSQL event store: appends handed over from memory', () => {
  const env = useEventStoreDatabase('kl_held');

  it('holds a big append whose positions are not one range as they were written', async () => {
    // The positions a COPY's rows took are a range unless other positions
    // were taken between them: then they are read back. A sequence stepping
    // by 2 leaves gaps in every append.
    const store = new PostgresEventStore(env.t.db, env.notifier);
    const before = (await store.lastPosition()) ?? LOG_START;
    const [{ sequence }] = await env.t.db.query<{ sequence: string }>(
      `SELECT pg_get_serial_sequence('kl_events', 'global_position') AS sequence`,
    );
    await env.t.db.query(`ALTER SEQUENCE ${sequence} INCREMENT BY 2`);
    try {
      const big = await store.appendToStream('held-gaps', events(1200), {
        expectedRevision: 'no_stream',
      });
      const all = await eventually(async () => {
        const read = await store.readAll(before, 10_000);
        return read.length === 1200 ? read : [];
      });
      expect(all[1].position.globalPosition - all[0].position.globalPosition).toBe(2n);
      expect(all[1199].position).toEqual(big.position);
      expect(store.heldAppend(big.position.transactionId)).toEqual(all);
    } finally {
      await env.t.db.query(`ALTER SEQUENCE ${sequence} INCREMENT BY 1`);
    }
  });

  it('hands over exactly what readAll reads back, for small (INSERT) and big (COPY) appends', async () => {
    const store = new PostgresEventStore(env.t.db, env.notifier);
    const before = (await store.lastPosition()) ?? LOG_START;
    const small = await store.appendToStream('held-small', events(7), {
      expectedRevision: 'no_stream',
    });
    await eventually(() => store.readAll(before, 1));
    const big = await store.appendToStream('held-big', events(1500), {
      expectedRevision: 'no_stream',
    });
    const all = await eventually(async () => {
      const read = await store.readAll(before, 10_000);
      return read.length === 1507 ? read : [];
    });
    expect(all.length).toBe(1507);
    expect(all[6].position).toEqual(small.position);
    expect(all[1506].position).toEqual(big.position);

    // From the start of each append, from inside it, cut by a limit, with
    // and without a type filter (other types without data): as read back.
    const froms: LogPosition[] = [before, all[2].position, all[6].position, all[900].position];
    for (const from of froms) {
      for (const limit of [1, 5, 700, 5000]) {
        for (const types of [undefined, ['Opened']]) {
          const held = await store.readAppended(from, limit, types);
          expect(held).not.toBeNull();
          const read = await store.readAll(from, limit, types);
          // Memory answers with the held appends that follow one another:
          // a prefix of what readAll reads.
          expect(held!.length).toBeGreaterThan(0);
          expect(held).toEqual(read.slice(0, held!.length));
          // The data's JSON too, key order included (toEqual ignores it).
          expect(held!.map((e) => JSON.stringify(e.data))).toEqual(
            read.slice(0, held!.length).map((e) => JSON.stringify(e.data)),
          );
        }
      }
    }
    // The rest of an append and the held one after it, and nothing past the log's end.
    expect(await store.readAppended(all[2].position, 5000)).toEqual(all.slice(3));
    expect(await store.readAppended(big.position, 5000)).toBeNull();
    // Every event of the append's transaction, for a reader of its stream.
    expect(store.heldAppend(big.position.transactionId)).toEqual(all.slice(7));
    // From inside a held append its next event is the log's next (every
    // event of its transaction is held): memory answers without asking.
    const queries = jest.spyOn(env.t.db.pool, 'query');
    try {
      expect(await store.readAppended(all[1000].position, 5)).toEqual(all.slice(1001, 1006));
      expect(queries).not.toHaveBeenCalled();
    } finally {
      queries.mockRestore();
    }
  });

  it('never hands over an append ahead of an older transaction that commits late', async () => {
    const store = new PostgresEventStore(env.t.db, env.notifier);
    const before = (await store.lastPosition()) ?? LOG_START;
    const slow = new Client({ connectionString: env.t.url });
    await slow.connect();
    try {
      // A writer in another process takes its transaction id first...
      await slow.query('BEGIN');
      await slow.query(
        `INSERT INTO kl_events (event_id, stream_id, stream_revision, type, schema_version,
                                data, metadata)
         VALUES (gen_random_uuid(), 'slow-other', 0, 'Late', 1, '{}', $1)`,
        [metadata],
      );
      // ...this process appends and commits after it.
      const fast = await store.appendToStream('fast-held', events(3), {
        expectedRevision: 'no_stream',
      });
      expect(await store.readAppended(before, 100)).toBeNull();
      expect(await store.readAll(before, 100)).toEqual([]);
      await slow.query('COMMIT');
      const read = await eventually(() => store.readAll(before, 100));
      expect(read.map((e) => e.type)).toEqual(['Late', 'Opened', 'Closed', 'Closed']);
      // The late event is next, and it is not in memory: read it back.
      expect(await store.readAppended(before, 100)).toBeNull();
      // Past it, the held append is next.
      expect(await store.readAppended(read[0].position, 100)).toEqual(read.slice(1));
      expect(read[3].position).toEqual(fast.position);
    } finally {
      await slow.end();
    }
  });

  it('hands over held appends together only while no other writer committed between them', async () => {
    const store = new PostgresEventStore(env.t.db, env.notifier);
    const other = new PostgresEventStore(env.t.db, env.notifier);
    const before = (await store.lastPosition()) ?? LOG_START;
    await store.appendToStream('chain-1', events(2), { expectedRevision: 'no_stream' });
    await store.appendToStream('chain-2', events(3), { expectedRevision: 'no_stream' });
    // Another process's append, which this one does not hold, then one more of its own.
    await other.appendToStream('chain-other', events(1), { expectedRevision: 'no_stream' });
    await store.appendToStream('chain-3', events(2), { expectedRevision: 'no_stream' });
    const read = await eventually(async () => {
      const all = await store.readAll(before, 100);
      return all.length === 8 ? all : [];
    });
    expect(read.map((e) => e.streamId)).toEqual([
      ...['chain-1', 'chain-1', 'chain-2', 'chain-2', 'chain-2'],
      ...['chain-other', 'chain-3', 'chain-3'],
    ]);
    // The first two together; the chain stops at the append it does not hold.
    expect(await store.readAppended(before, 100)).toEqual(read.slice(0, 5));
    expect(await store.readAppended(read[4].position, 100)).toBeNull();
    expect(await store.readAppended(read[5].position, 100)).toEqual(read.slice(6));
    // A limit cuts the chain as it cuts readAll.
    expect(await store.readAppended(before, 3)).toEqual(read.slice(0, 3));
  });

  it('lets go of appends the readers are past, and of the oldest beyond its budget', async () => {
    const store = new PostgresEventStore(env.t.db, env.notifier, undefined, 10);
    const before = (await store.lastPosition()) ?? LOG_START;
    const first = await store.appendToStream('budget-1', events(6), {
      expectedRevision: 'no_stream',
    });
    const second = await store.appendToStream('budget-2', events(6), {
      expectedRevision: 'no_stream',
    });
    await eventually(async () => {
      const read = await store.readAll(before, 100);
      return read.length === 12 ? read : [];
    });
    // Twelve events do not fit in ten: the first append went, the log answers.
    expect(store.heldAppend(first.position.transactionId)).toBeNull();
    expect(await store.readAppended(before, 100)).toBeNull();
    expect(await store.readAppended(first.position, 100)).toHaveLength(6);
    store.releaseAppends(second.position);
    expect(store.heldAppend(second.position.transactionId)).toBeNull();
    expect(await store.readAppended(first.position, 100)).toBeNull();
    // Too big to hold at all.
    const big = await store.appendToStream('budget-3', events(11), {
      expectedRevision: 'no_stream',
    });
    expect(store.heldAppend(big.position.transactionId)).toBeNull();
  });

  it("writes a big append in COPY's binary format, each event's JSON text as written", async () => {
    const store = new PostgresEventStore(env.t.db, env.notifier);
    const sent: string[] = [];
    const original = Client.prototype.query as (...args: unknown[]) => unknown;
    const query = jest.spyOn(Client.prototype, 'query').mockImplementation(function (
      this: Client,
      ...args: unknown[]
    ) {
      const text = (args[0] as { text?: unknown } | undefined)?.text ?? args[0];
      if (typeof text === 'string') sent.push(text);
      return original.apply(this, args);
    } as never);
    const awkward = events(1100).map((e, i) => ({
      ...e,
      // a uuid in capitals is the same uuid
      eventId: i % 7 ? e.eventId : e.eventId.toUpperCase(),
      type: i % 2 ? 'Opened\ttab' : 'Closed',
      schemaVersion: 1 + (i % 3),
      data: { ...(e.data as object), odd: 'nul\u0000 \ud83d 😀 € \u2028 "q" \\N \\\\', at: i },
    }));
    let appended;
    try {
      appended = await store.appendToStream('binary-copy', awkward, {
        expectedRevision: 'no_stream',
      });
    } finally {
      query.mockRestore();
    }
    expect(sent.filter((t) => t.includes('COPY kl_events'))).toEqual([
      expect.stringContaining('FROM STDIN (FORMAT binary)'),
    ]);
    const rows = await env.t.db.query<{
      event_id: string;
      stream_revision: string;
      type: string;
      schema_version: number;
      data: string;
      metadata: unknown;
      txid: string;
    }>(
      `SELECT event_id, stream_revision::text, type, schema_version, data::text AS data,
              metadata, transaction_id::text AS txid
         FROM kl_events WHERE stream_id = 'binary-copy' ORDER BY kl_events.stream_revision`,
    );
    expect(rows).toEqual(
      awkward.map((e, i) => ({
        event_id: e.eventId.toLowerCase(),
        stream_revision: String(i),
        type: e.type,
        schema_version: e.schemaVersion,
        data: JSON.stringify(e.data),
        metadata,
        txid: appended!.position.transactionId.toString(),
      })),
    );
  });

  it("asks whether an append is a reader's next in log order, not by a scan of the whole log", async () => {
    // 40,000 older events, in two transactions, with the planner's statistics.
    for (const n of [1, 2]) {
      await env.t.db.query(
        `INSERT INTO kl_events (event_id, stream_id, stream_revision, type, schema_version,
                                data, metadata)
         SELECT gen_random_uuid(), 'older-${n}', g, 'Opened', 1, '{}', '{}'
           FROM generate_series(0, 19999) AS g`,
      );
    }
    await env.t.db.query('ANALYZE kl_events');
    const store = new PostgresEventStore(env.t.db, env.notifier);
    const before = (await store.lastPosition())!;
    let inFlight: AppendInFlight | undefined;
    const unwatch = store.watchAppends((append) => (inFlight = append));
    try {
      await store.appendToStream('asked', events(1200), { expectedRevision: 'no_stream' });
    } finally {
      unwatch();
    }
    const recorded = (await inFlight!.committed)!;
    // Each question also explained, with the same parameters, on the same connection.
    const client = await env.t.db.pool.connect();
    const plans: string[] = [];
    const session = {
      async query(text: string, params?: unknown[]) {
        const { rows } = await client.query(`EXPLAIN (FORMAT JSON) ${text}`, params);
        plans.push(JSON.stringify(rows));
        return client.query(text, params);
      },
    };
    try {
      await eventually(async () =>
        (await inFlight!.nextAfter(before, recorded, ['Opened'], session)) === 'next' ? [1] : [],
      );
      // An older event of the type between: found, and the answer stays.
      const older = (await store.readAll(LOG_START, 1))[0].position;
      expect(await inFlight!.nextAfter(older, recorded, ['Opened'], session)).toBe('not next');
    } finally {
      client.release();
    }
    expect(plans.length).toBeGreaterThan(1);
    for (const plan of plans) {
      expect(plan).toContain('kl_events_log_order');
      expect(plan).not.toContain('Seq Scan');
    }
  });
});
