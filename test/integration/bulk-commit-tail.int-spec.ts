import { randomUUID } from 'node:crypto';
import type { LogPosition } from '../../src/domain/shared/event';
import { comparePositions } from '../../src/domain/shared/event';
import { ProjectionRunner } from '../../src/projections/projection-runner';
import type { Projector } from '../../src/projections/projector';
import { StateHarness } from '../support/state-harness';
import { quietLogger } from '../support/test-database';

const event = (type: string, n: number) => ({
  eventId: randomUUID(),
  type,
  schemaVersion: 1,
  data: { n },
  metadata: {
    actor: 'tail',
    correlationId: randomUUID(),
    causationId: null,
    occurredAt: '2026-01-01T00:00:00.000Z',
  },
});

/**
 * Right after a bulk commit, the projectors that handle none of its events
 * leave their checkpoints where they are until the writer has caught up the
 * ones it feeds (its answer waits for that catch-up, and their
 * transactions would compete with it for the CPU); then they move, so that
 * every read model still gets there.
 */
describe('the tail of a bulk commit', () => {
  let h: StateHarness;
  beforeAll(async () => {
    h = await StateHarness.create();
  });
  afterAll(async () => {
    await h.close();
  });

  it('moves the other projectors past it once the writer has caught up', async () => {
    let otherMovedDuringCatchUp: boolean | undefined;
    const checkpointOfOther = async () => {
      const rows = await h.db.query<{ tx: string; gp: string }>(
        `SELECT transaction_id::text AS tx, global_position AS gp FROM kl_checkpoints
          WHERE projection = 'tail-other'`,
      );
      return rows.length === 0
        ? undefined
        : { transactionId: BigInt(rows[0].tx), globalPosition: BigInt(rows[0].gp) };
    };
    const otherPast = async (position: LogPosition) => {
      const at = await checkpointOfOther();
      return at !== undefined && comparePositions(at, position) >= 0;
    };
    const fedEvents: number[] = [];
    const fed: Projector = {
      name: 'tail-fed',
      handles: ['TailBulked'],
      tables: [],
      async apply(events) {
        fedEvents.push(...events.map((e) => (e.data as { n: number }).n));
        const last = events[events.length - 1];
        if ((last.data as { n: number }).n === 0) return;
        // The bulk commit's catch-up lasts a while: long enough for the
        // other projector's loop, were it not held off, to pass over it.
        let moved = false;
        for (let i = 0; i < 25 && !moved; i++) {
          await new Promise((r) => setTimeout(r, 20));
          moved = await otherPast(last.position);
        }
        otherMovedDuringCatchUp ??= moved;
      },
    };
    const other: Projector = {
      name: 'tail-other',
      handles: ['TailOther'],
      tables: [],
      apply: () => Promise.resolve(),
    };
    const runner = new ProjectionRunner({
      events: h.events,
      db: h.db,
      notifier: h.notifier,
      logger: quietLogger,
      // However slow the machine, the writer below starts in time.
      writerStartMs: 60_000,
    }).register([fed, other]);
    runner.start();
    try {
      // Both loops at rest, past an event of each.
      const small = await h.events.appendToStream(
        'tail-small',
        [event('TailOther', 0), event('TailBulked', 0)],
        { expectedRevision: 'no_stream' },
      );
      await runner.waitForPosition(small.position);
      // A bulk append (written beside its announcement to the runner), none
      // of its events the other projector's.
      const bulked = Array.from({ length: 300 }, (_, i) => event('TailBulked', i + 1));
      const appended = h.events.appendToStream('tail-bulk', bulked, {
        expectedRevision: 'no_stream',
      });
      const bulk = (await appended).position;
      await runner.waitForPosition(bulk, ['TailBulked']);
      expect(otherMovedDuringCatchUp).toBe(false);
      expect(fedEvents).toEqual(Array.from({ length: 301 }, (_, i) => i));
      // And then it moves: every read model gets there, and the runner says so.
      for (const deadline = Date.now() + 10_000; Date.now() < deadline;) {
        if (await otherPast(bulk)) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(await otherPast(bulk)).toBe(true);
      expect(await runner.caughtUp()).toBe(true);
      await runner.waitForPosition(bulk);
    } finally {
      await runner.stop();
    }
  });

  it('once past it, each loop waits for the next append rather than reading the log at once', async () => {
    const applied: number[] = [];
    const fed: Projector = {
      name: 'tail-fed-2',
      handles: ['TailBulked2'],
      tables: [],
      apply: () => Promise.resolve(),
    };
    const other: Projector = {
      name: 'tail-other-2',
      handles: ['TailOther2'],
      tables: [],
      apply(events) {
        applied.push(...events.map((e) => (e.data as { n: number }).n));
        return Promise.resolve();
      },
    };
    const runner = new ProjectionRunner({
      events: h.events,
      db: h.db,
      notifier: h.notifier,
      logger: quietLogger,
    }).register([fed, other]);
    // Each projector's reads of the log (the types asked are its own).
    const reads = { fed: [] as LogPosition[], other: [] as LogPosition[] };
    const readAll = h.events.readAll.bind(h.events);
    const spy = jest.spyOn(h.events, 'readAll').mockImplementation((from, limit, types) => {
      if (types?.includes('TailOther2')) reads.other.push(from);
      if (types?.includes('TailBulked2')) reads.fed.push(from);
      return readAll(from, limit, types);
    });
    runner.start();
    try {
      const small = await h.events.appendToStream(
        'tail-small-2',
        [event('TailOther2', 0), event('TailBulked2', 0)],
        { expectedRevision: 'no_stream' },
      );
      await runner.waitForPosition(small.position);
      // More events than a loop's batch, none of them the other projector's.
      const bulked = Array.from({ length: 1200 }, (_, i) => event('TailBulked2', i + 1));
      const bulk = (
        await h.events.appendToStream('tail-bulk-2', bulked, { expectedRevision: 'no_stream' })
      ).position;
      await runner.waitForPosition(bulk, ['TailBulked2']);
      const otherAt = async () => {
        const rows = await h.db.query<{ tx: string; gp: string }>(
          `SELECT transaction_id::text AS tx, global_position AS gp FROM kl_checkpoints
            WHERE projection = 'tail-other-2'`,
        );
        return { transactionId: BigInt(rows[0].tx), globalPosition: BigInt(rows[0].gp) };
      };
      for (const deadline = Date.now() + 10_000; Date.now() < deadline;) {
        if (comparePositions(await otherAt(), bulk) >= 0) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(comparePositions(await otherAt(), bulk)).toBe(0);
      // Time for a loop that looked again at once to have read the log: the
      // one the writer caught up, and the one that passed over the append.
      await new Promise((r) => setTimeout(r, 500));
      const past = (from: LogPosition) => comparePositions(from, bulk) >= 0;
      expect(reads.fed.filter(past)).toEqual([]);
      expect(reads.other.filter(past)).toEqual([]);
      // The next append still wakes it: its event is applied by the loop alone.
      await h.events.appendToStream('tail-small-2', [event('TailOther2', 1)], {
        expectedRevision: 1n,
      });
      for (const deadline = Date.now() + 10_000; Date.now() < deadline;) {
        if (applied.includes(1)) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(applied).toEqual([0, 1]);
    } finally {
      spy.mockRestore();
      await runner.stop();
    }
  });
});
