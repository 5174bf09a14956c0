import { randomUUID } from 'node:crypto';
import type {
  EventStore,
  EventToAppend,
  ExpectedRevision,
} from '../../src/application/ports/event-store.port';
import {
  EventIdConflictError,
  WrongExpectedRevisionError,
} from '../../src/domain/shared/concurrency-error';
import {
  comparePositions,
  EventMetadata,
  LOG_START,
  RecordedEvent,
} from '../../src/domain/shared/event';

/**
 * The behaviour every EventStore adapter must have. An adapter's test calls
 * this with a factory for a fresh, empty store.
 */
export interface ConformanceSubject {
  store: EventStore;
  close(): Promise<void>;
}

const meta = (actor = 'tester'): EventMetadata => ({
  actor,
  correlationId: randomUUID(),
  causationId: null,
  occurredAt: new Date().toISOString(),
});

/** A new event (fresh id, schema version 1). */
export function event(type: string, data: unknown, metadata = meta()): EventToAppend {
  return { eventId: randomUUID(), type, schemaVersion: 1, data, metadata };
}

export function events(n: number, type = 'Thing', extra: object = {}): EventToAppend[] {
  return Array.from({ length: n }, (_, i) => event(type, { i, ...extra }));
}

/** The same event under a new id. */
const fresh = (e: EventToAppend): EventToAppend => ({ ...e, eventId: randomUUID() });

async function expectConflict(p: Promise<unknown>): Promise<void> {
  await expect(p).rejects.toBeInstanceOf(WrongExpectedRevisionError);
}

export function describeEventStoreConformance(
  name: string,
  open: () => Promise<ConformanceSubject>,
): void {
  describe(`EventStore conformance: ${name}`, () => {
    let subject: ConformanceSubject;
    let store: EventStore;
    beforeAll(async () => {
      subject = await open();
      store = subject.store;
    });
    afterAll(async () => subject.close());

    const stream = () => `test-${randomUUID()}`;

    describe('expected revision', () => {
      it('no_stream creates a stream once and refuses the second time', async () => {
        const s = stream();
        const r = await store.appendToStream(s, events(2), { expectedRevision: 'no_stream' });
        expect(r.nextExpectedRevision).toBe(1n);
        await expectConflict(store.appendToStream(s, events(1), { expectedRevision: 'no_stream' }));
        expect(await store.readStream(s)).toHaveLength(2);
      });

      it('stream_exists refuses a missing stream and appends to an existing one', async () => {
        const s = stream();
        await expectConflict(
          store.appendToStream(s, events(1), { expectedRevision: 'stream_exists' }),
        );
        expect(await store.readStream(s)).toHaveLength(0);
        await store.appendToStream(s, events(1), { expectedRevision: 'no_stream' });
        const r = await store.appendToStream(s, events(3), { expectedRevision: 'stream_exists' });
        expect(r.nextExpectedRevision).toBe(3n);
      });

      it('an exact revision must match the last event, neither stale nor ahead', async () => {
        const s = stream();
        const first = await store.appendToStream(s, events(3), { expectedRevision: 'no_stream' });
        expect(first.nextExpectedRevision).toBe(2n);
        await expectConflict(store.appendToStream(s, events(1), { expectedRevision: 1n }));
        await expectConflict(store.appendToStream(s, events(1), { expectedRevision: 3n }));
        await expectConflict(store.appendToStream(stream(), events(1), { expectedRevision: 0n }));
        const next = await store.appendToStream(s, events(1), { expectedRevision: 2n });
        expect(next.nextExpectedRevision).toBe(3n);
        const read = await store.readStream(s);
        expect(read.map((e) => e.streamRevision)).toEqual([0n, 1n, 2n, 3n]);
      });

      it('any appends whether or not the stream exists', async () => {
        const s = stream();
        expect(
          (await store.appendToStream(s, events(1), { expectedRevision: 'any' }))
            .nextExpectedRevision,
        ).toBe(0n);
        expect(
          (await store.appendToStream(s, events(2), { expectedRevision: 'any' }))
            .nextExpectedRevision,
        ).toBe(2n);
      });

      it('of two racing writers at one revision, exactly one wins', async () => {
        const s = stream();
        await store.appendToStream(s, events(1), { expectedRevision: 'no_stream' });
        const results = await Promise.allSettled(
          Array.from({ length: 10 }, () =>
            store.appendToStream(s, events(1), { expectedRevision: 0n }),
          ),
        );
        expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
        for (const r of results.filter((r) => r.status === 'rejected')) {
          expect((r as PromiseRejectedResult).reason).toBeInstanceOf(WrongExpectedRevisionError);
        }
        expect(await store.readStream(s)).toHaveLength(2);
      });

      it('an append that names the revision of another stream stands only while it is there', async () => {
        const [s, other] = [stream(), stream()];
        const absent = { streamId: other, revision: null };
        for (const expectedRevision of ['no_stream', 'any'] as const) {
          await store.appendToStream(s, events(1), { expectedRevision, alsoAt: absent });
        }
        await store.appendToStream(other, events(2), { expectedRevision: 'no_stream' });
        // Small appends and big ones (a transaction of their own) alike.
        for (const n of [1, 150]) {
          for (const expectedRevision of [1n, 'stream_exists', 'any'] as const) {
            const refused = store.appendToStream(s, events(n), {
              expectedRevision,
              alsoAt: absent,
            });
            await expect(refused).rejects.toMatchObject({
              constructor: WrongExpectedRevisionError,
              metadata: { streamId: other, expected: 'no_stream', actual: '1' },
            });
            await expectConflict(
              store.appendToStream(s, events(n), {
                expectedRevision,
                alsoAt: { streamId: other, revision: 0n },
              }),
            );
          }
        }
        expect(await store.readStream(s)).toHaveLength(2);
        const stood = await store.appendToStream(s, events(1), {
          expectedRevision: 1n,
          alsoAt: { streamId: other, revision: 1n },
        });
        expect(stood.nextExpectedRevision).toBe(2n);
        // Its own stream elsewhere is still its own stream's conflict.
        await expect(
          store.appendToStream(s, events(1), {
            expectedRevision: 1n,
            alsoAt: { streamId: other, revision: 0n },
          }),
        ).rejects.toMatchObject({ metadata: { streamId: s } });
        expect(await store.readStream(other)).toHaveLength(2);
      });
    });

    describe('event ids', () => {
      const same = (batch: EventToAppend[]) => batch.map((e) => ({ ...e }));

      it.each<[string, (s: string) => Promise<ExpectedRevision>]>([
        ['no_stream', async () => 'no_stream'],
        [
          'an exact revision',
          async (s) => {
            await store.appendToStream(s, events(2), { expectedRevision: 'no_stream' });
            return 1n;
          },
        ],
        ['any', async () => 'any'],
        [
          'stream_exists',
          async (s) => {
            await store.appendToStream(s, events(1), { expectedRevision: 'no_stream' });
            return 'stream_exists';
          },
        ],
      ])(
        'an append sent again with the same ids (expecting %s) is stored once and answers as the first did',
        async (_, setUp) => {
          const s = stream();
          const expectedRevision = await setUp(s);
          const before = (await store.readStream(s)).length;
          const batch = events(3, 'Once');
          const first = await store.appendToStream(s, batch, { expectedRevision });
          const again = await store.appendToStream(s, same(batch), { expectedRevision });
          expect(again).toEqual(first);
          // Even after the stream moved on: a retry may arrive late.
          await store.appendToStream(s, events(1), { expectedRevision: 'any' });
          expect(await store.appendToStream(s, same(batch), { expectedRevision })).toEqual(first);
          const read = await store.readStream(s);
          expect(read).toHaveLength(before + 4);
          expect(read.filter((e) => e.type === 'Once').map((e) => e.eventId)).toEqual(
            batch.map((e) => e.eventId),
          );
        },
      );

      it('racing copies of one append store it once and all answer alike', async () => {
        for (const expectedRevision of [0n, 'any'] as const) {
          const s = stream();
          await store.appendToStream(s, events(1), { expectedRevision: 'no_stream' });
          const batch = events(2, 'Raced');
          const results = await Promise.all(
            Array.from({ length: 6 }, () =>
              store.appendToStream(s, same(batch), { expectedRevision }),
            ),
          );
          for (const r of results) expect(r).toEqual(results[0]);
          expect(results[0].nextExpectedRevision).toBe(2n);
          expect(await store.readStream(s)).toHaveLength(3);
        }
      });

      it('refuses an id already stored as anything else, and writes nothing', async () => {
        const s = stream();
        const batch = events(3, 'Stored');
        await store.appendToStream(s, batch, { expectedRevision: 'no_stream' });
        const [a, b, c] = batch;
        const refusals: [string, string, EventToAppend[], ExpectedRevision][] = [
          ['other data', s, [{ ...a, data: { i: 99 } }, b, c], 'no_stream'],
          ['other type', s, [a, b, { ...c, type: 'Other' }], 'no_stream'],
          ['other metadata', s, [a, { ...b, metadata: meta('mallory') }, c], 'no_stream'],
          ['other schema version', s, [a, b, { ...c, schemaVersion: 2 }], 'no_stream'],
          ['another stream', stream(), same(batch), 'no_stream'],
          ['part of the append', s, [a, b], 'no_stream'],
          ['more than the append', s, [...same(batch), ...events(1)], 'no_stream'],
          ['another revision', s, same(batch), 2n],
          ['reordered', s, [b, a, c], 'no_stream'],
        ];
        for (const [why, target, attempt, expectedRevision] of refusals) {
          const p = store.appendToStream(target, attempt, { expectedRevision });
          await expect(p.then(() => why)).rejects.toBeInstanceOf(EventIdConflictError);
        }
        const read = await store.readStream(s);
        expect(read.map((e) => e.eventId)).toEqual(batch.map((e) => e.eventId));
        expect(read.map((e) => e.data)).toEqual(batch.map((e) => e.data));
      });

      it('a new id on a stream that moved is still a conflict of revisions', async () => {
        const s = stream();
        await store.appendToStream(s, events(2), { expectedRevision: 'no_stream' });
        await expectConflict(store.appendToStream(s, events(1), { expectedRevision: 0n }));
      });

      it('refuses malformed or repeated ids in one append before storing anything', async () => {
        const s = stream();
        const [x] = events(1);
        await expect(
          store.appendToStream(s, [x, { ...x }], { expectedRevision: 'no_stream' }),
        ).rejects.toThrow(/appears twice/);
        await expect(
          store.appendToStream(s, [{ ...x, eventId: 'not-a-uuid' }], {
            expectedRevision: 'no_stream',
          }),
        ).rejects.toThrow(/must be a uuid/);
        expect(await store.readStream(s)).toEqual([]);
      });
    });

    it('reads a stream back with id, type, schema version, data and metadata, from a revision on', async () => {
      const s = stream();
      const written: EventToAppend[] = [
        event('Opened', { name: 'a', nested: { n: 1 } }, meta('alice')),
        event('Closed', { reason: 'done' }, { ...meta('bob'), causationId: 'c1' }),
      ];
      written[1].schemaVersion = 3;
      await store.appendToStream(s, written, { expectedRevision: 'no_stream' });
      const read = await store.readStream(s);
      expect(
        read.map((e) => ({
          eventId: e.eventId,
          type: e.type,
          schemaVersion: e.schemaVersion,
          data: e.data,
          metadata: e.metadata,
        })),
      ).toEqual(written);
      expect(read.every((e) => e.streamId === s)).toBe(true);
      expect(comparePositions(read[0].position, read[1].position)).toBeLessThan(0);
      const tail = await store.readStream(s, { fromRevision: 1n });
      expect(tail.map((e) => e.type)).toEqual(['Closed']);
    });

    it('keeps any JSON string exactly, NUL characters and astral symbols included', async () => {
      const s = stream();
      const data = {
        text: 'a\u0000b \\u0000 "q" \u{1F600} \uFFFD',
        key: { 'k\u0000': [1.5, null] },
      };
      await store.appendToStream(s, [event('Odd', data)], {
        expectedRevision: 'no_stream',
      });
      expect((await store.readStream(s))[0].data).toEqual(data);
    });

    it('readAll pages through the log in order', async () => {
      const s = stream();
      const paged = events(5, 'Paged');
      const r = await store.appendToStream(s, paged, { expectedRevision: 'no_stream' });
      const mine: RecordedEvent[] = [];
      let from = LOG_START;
      // Committed events become readable once every older transaction ends,
      // and other writers (other tests) may hold one open for a moment.
      const deadline = Date.now() + 15_000;
      while (mine.length < 5 && Date.now() < deadline) {
        const page = await store.readAll(from, 3);
        if (!page.length) {
          await new Promise((r) => setTimeout(r, 50));
          continue;
        }
        mine.push(...page.filter((e) => e.streamId === s));
        from = page[page.length - 1].position;
      }
      expect(mine.map((e) => (e.data as { i: number }).i)).toEqual([0, 1, 2, 3, 4]);
      expect(mine.map((e) => [e.eventId, e.schemaVersion])).toEqual(
        paged.map((e) => [e.eventId, 1]),
      );
      expect(comparePositions(mine[4].position, r.position)).toBe(0);
    });

    it('readAll with types leaves out the data of other types, not their positions', async () => {
      const s = stream();
      await store.appendToStream(s, [event('Kept', { k: 1 }), event('Other', { o: 2 })], {
        expectedRevision: 'no_stream',
      });
      const [first] = await store.readStream(s, { maxCount: 1 });
      const before = { ...first.position, globalPosition: first.position.globalPosition - 1n };
      const deadline = Date.now() + 15_000;
      let mine: RecordedEvent[] = [];
      while (mine.length < 2 && Date.now() < deadline) {
        const page = await store.readAll(before, 1000, ['Kept']);
        mine = page.filter((e) => e.streamId === s);
        if (mine.length < 2) await new Promise((r) => setTimeout(r, 50));
      }
      expect(mine.map((e) => [e.type, e.data])).toEqual([
        ['Kept', { k: 1 }],
        ['Other', null],
      ]);
    });

    it('reads one event by its global position, and the last position of the log', async () => {
      const s = stream();
      const r = await store.appendToStream(s, [event('Found', { f: 1 })], {
        expectedRevision: 'no_stream',
      });
      const deadline = Date.now() + 15_000;
      let last = await store.lastPosition();
      while ((!last || comparePositions(last, r.position) < 0) && Date.now() < deadline) {
        await new Promise((res) => setTimeout(res, 50));
        last = await store.lastPosition();
      }
      expect(comparePositions(last!, r.position)).toBeGreaterThanOrEqual(0);
      expect(await store.readAt(r.position.globalPosition)).toMatchObject({
        streamId: s,
        type: 'Found',
        data: { f: 1 },
        position: r.position,
      });
      expect(await store.readAt(r.position.globalPosition + 1_000_000n)).toBeNull();
    });

    it('wakes a waiter for appends when another writer appends, before its timeout', async () => {
      const started = Date.now();
      const woken = store.waitForAppend(10_000);
      // The wait may still be setting up: append until it wakes.
      for (let i = 0; i < 50 && Date.now() - started < 5_000; i++) {
        await store.appendToStream(stream(), [event('Wake', {})], {
          expectedRevision: 'no_stream',
        });
        const done = await Promise.race([
          woken.then(() => true),
          new Promise((r) => setTimeout(r, 100, false)),
        ]);
        if (done) break;
      }
      await woken;
      expect(Date.now() - started).toBeLessThan(5_000);
      const aborted = new AbortController();
      const waiting = store.waitForAppend(10_000, aborted.signal);
      aborted.abort();
      await waiting;
      expect(Date.now() - started).toBeLessThan(5_000);
    });

    it('a wait given a mark from before an append returns at once, even if the signal came first', async () => {
      await store.waitForAppend(1); // listening
      const mark = store.appendMark();
      await store.appendToStream(stream(), [event('Marked', {})], {
        expectedRevision: 'no_stream',
      });
      const deadline = Date.now() + 5_000;
      while (store.appendMark() === mark && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 10));
      }
      expect(store.appendMark()).not.toBe(mark);
      // The signal arrived before this wait began: it must not wait for the next one.
      const started = Date.now();
      await store.waitForAppend(10_000, undefined, mark);
      expect(Date.now() - started).toBeLessThan(5_000);
    });

    it('appends 20,000 events atomically in one call', async () => {
      const s = stream();
      const r = await store.appendToStream(s, events(20_000, 'Bulk', { pad: 'x'.repeat(100) }), {
        expectedRevision: 'no_stream',
      });
      expect(r.nextExpectedRevision).toBe(19_999n);
      const read = await store.readStream(s);
      expect(read).toHaveLength(20_000);
      expect((read[19_999].data as { i: number }).i).toBe(19_999);
    });

    it('a big append stores exactly what the same events appended a few at a time store', async () => {
      // Big enough for an adapter's bulk path, whatever it is; text that
      // means something to any wire format: separators, escapes, NUL.
      const odd = ['tab\there', 'line\nbreak\r\n', 'back\\slash \\N \\.', '"q"', 'nul\u0000'];
      const batch = Array.from({ length: 2_500 }, (_, i) =>
        event(
          i % 7 === 0 ? 'Odd\tType' : 'Plain',
          { i, text: odd[i % odd.length], nested: { [odd[(i + 1) % odd.length]]: [i, 1.5] } },
          // metadata is jsonb, which has no NUL
          { ...meta(`actor ${odd[i % 4]}`), causationId: null },
        ),
      );
      batch[11].schemaVersion = 4;
      const big = stream();
      const small = stream();
      const before = await store.lastPosition();
      const r = await store.appendToStream(big, batch, { expectedRevision: 'no_stream' });
      for (let i = 0; i < batch.length; i += 100) {
        await store.appendToStream(small, batch.slice(i, i + 100).map(fresh), {
          expectedRevision: i === 0 ? 'no_stream' : BigInt(i - 1),
        });
      }
      const shape = (e: Omit<RecordedEvent, 'eventId' | 'streamId' | 'position'>) => ({
        type: e.type,
        schemaVersion: e.schemaVersion,
        data: e.data,
        metadata: e.metadata,
        streamRevision: e.streamRevision,
      });
      const read = await store.readStream(big);
      expect(read.map((e) => e.eventId)).toEqual(batch.map((e) => e.eventId));
      expect(read.map(shape)).toEqual((await store.readStream(small)).map(shape));
      expect(read.map(shape)).toEqual(
        batch.map((e, i) => shape({ ...e, streamRevision: BigInt(i) })),
      );
      // In the log: in revision order, after what was there, one transaction,
      // and the append answered with its last event's position.
      for (let i = 1; i < read.length; i++) {
        expect(comparePositions(read[i - 1].position, read[i].position)).toBeLessThan(0);
        expect(read[i].position.transactionId).toBe(read[0].position.transactionId);
      }
      if (before) expect(comparePositions(before, read[0].position)).toBeLessThan(0);
      expect(r.position).toEqual(read[read.length - 1].position);
      expect(r.nextExpectedRevision).toBe(2_499n);
      const logged = await store.readAll(before ?? LOG_START, 10_000);
      expect(logged.filter((e) => e.streamId === big).map((e) => e.eventId)).toEqual(
        batch.map((e) => e.eventId),
      );
    });

    it('a big append that meets a stored id midway stores none of it', async () => {
      const s = stream();
      const [stored] = events(1, 'Stored');
      await store.appendToStream(stream(), [stored], { expectedRevision: 'no_stream' });
      const batch = events(2_500, 'Doomed');
      batch[2_000] = { ...stored };
      await expect(
        store.appendToStream(s, batch, { expectedRevision: 'no_stream' }),
      ).rejects.toBeInstanceOf(EventIdConflictError);
      expect(await store.readStream(s)).toEqual([]);
      for (const i of [0, 1_999, 2_001]) {
        const again = await store.appendToStream(stream(), [{ ...batch[i] }], {
          expectedRevision: 'no_stream',
        });
        expect(again.nextExpectedRevision).toBe(0n); // its id was not stored before
      }
      const r = await store.appendToStream(s, events(1), { expectedRevision: 'no_stream' });
      expect(r.nextExpectedRevision).toBe(0n);
    });

    it('a batch that fails midway leaves nothing behind', async () => {
      const s = stream();
      await store.appendToStream(s, events(1), { expectedRevision: 'no_stream' });
      const batch = events(12_000, 'Doomed');
      // Not JSON: whatever the adapter does first (serialise, send, insert),
      // event 9,000 cannot be stored, after earlier events already were.
      batch[9_000] = event('Doomed', { bad: 10n });
      await expect(store.appendToStream(s, batch, { expectedRevision: 0n })).rejects.toBeDefined();
      expect(await store.readStream(s)).toHaveLength(1);
      const r = await store.appendToStream(s, events(1), { expectedRevision: 0n });
      expect(r.nextExpectedRevision).toBe(1n);
    });

    it('a live subscriber sees every event of 8 concurrent writers exactly once, in log order', async () => {
      const writers = 8;
      const perWriter = 500;
      const runId = randomUUID();
      const streams = Array.from({ length: writers }, (_, w) => `conc-${runId}-${w}`);
      // Start from the end of the log as it is now.
      let start = LOG_START;
      for (;;) {
        const page = await store.readAll(start, 10_000);
        if (!page.length) break;
        start = page[page.length - 1].position;
      }
      const abort = new AbortController();
      const seen: RecordedEvent[] = [];
      const total = writers * perWriter;
      const subscriber = (async () => {
        for await (const e of store.subscribe(start, abort.signal)) {
          if (e.streamId.startsWith(`conc-${runId}`)) seen.push(e);
          if (seen.length >= total) break;
        }
      })();
      await Promise.all(
        streams.map(async (s) => {
          let expected: bigint | 'no_stream' = 'no_stream';
          for (let i = 0; i < perWriter; i++) {
            const r = await store.appendToStream(s, [event('Tick', { i })], {
              expectedRevision: expected,
            });
            expected = r.nextExpectedRevision;
          }
        }),
      );
      const timeout = setTimeout(() => abort.abort(), 30_000);
      await subscriber;
      clearTimeout(timeout);
      abort.abort();

      {
        const k = new Map<string, number>();
        seen.forEach((e, i) => {
          const key = `${e.streamId}/${e.streamRevision}`;
          if (k.has(key))
            console.log(
              'DUP',
              i,
              k.get(key),
              JSON.stringify(
                seen
                  .slice(Math.max(0, k.get(key)! - 3), i + 2)
                  .map((e) => [
                    String(e.position.transactionId),
                    String(e.position.globalPosition),
                  ]),
              ),
            );
          k.set(key, i);
        });
      }
      expect(seen).toHaveLength(total);
      const keys = new Set(seen.map((e) => `${e.streamId}/${e.streamRevision}`));
      expect(keys.size).toBe(total);
      for (let i = 1; i < seen.length; i++) {
        expect(comparePositions(seen[i - 1].position, seen[i].position)).toBeLessThan(0);
      }
      for (const s of streams) {
        const revs = seen.filter((e) => e.streamId === s).map((e) => Number(e.streamRevision));
        expect(revs).toEqual(Array.from({ length: perWriter }, (_, i) => i));
      }
    });
  });
}
