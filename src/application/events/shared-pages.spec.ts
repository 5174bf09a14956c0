import type { LoggedEvent, LogPosition } from '../../domain/shared/event';
import { SharedPages } from './shared-pages';

const at = (n: number): LogPosition => ({ transactionId: BigInt(n), globalPosition: BigInt(n) });

function event(n: number, bytes = 10): LoggedEvent {
  return {
    eventId: `e-${n}`,
    type: 'LockAcquired',
    schemaVersion: 1,
    data: {},
    dataJson: 'x'.repeat(bytes),
    metadata: { actor: 'alice', correlationId: `c-${n}`, occurredAt: '2026-12-01T00:00:00Z' },
    streamId: 'state-s',
    streamRevision: BigInt(n),
    position: at(n),
  } as LoggedEvent;
}

/** A log of `length` events whose reads are counted, each answered when `answer` is called. */
function countingLog(length: number, bytes = 10) {
  const events = Array.from({ length }, (_, i) => event(i + 1, bytes));
  const reads: string[] = [];
  const pending: (() => void)[] = [];
  return {
    reads,
    answer: () => pending.splice(0).forEach((f) => f()),
    append: (n: number) =>
      events.push(...Array.from({ length: n }, (_, i) => event(length + i + 1))),
    store: {
      readLog: (from: LogPosition, limit: number) => {
        reads.push(`${from.globalPosition}+${limit}`);
        return new Promise<LoggedEvent[]>((resolve) =>
          pending.push(() =>
            resolve(
              events.filter((e) => e.position.globalPosition > from.globalPosition).slice(0, limit),
            ),
          ),
        );
      },
    },
  };
}

describe('SharedPages', () => {
  it('reads a page asked for while it is being read once, and hands both the same events', async () => {
    const log = countingLog(10);
    const pages = new SharedPages(log.store, 4, 1024 * 1024);
    const both = Promise.all([pages.readLog(at(0), 5), pages.readLog(at(0), 5)]);
    log.answer();
    const [a, b] = await both;

    expect(log.reads).toEqual(['0+5']);
    expect(a.map((e) => e.eventId)).toEqual(['e-1', 'e-2', 'e-3', 'e-4', 'e-5']);
    expect(b).toBe(a);
  });

  it('hands out a full page read lately again, and reads it again once it is no longer among the last kept', async () => {
    const log = countingLog(20);
    const pages = new SharedPages(log.store, 2, 1024 * 1024);
    const read = async (from: number) => {
      const page = pages.readLog(at(from), 5);
      log.answer();
      return (await page).map((e) => e.eventId);
    };
    for (const from of [0, 5, 10]) await read(from);
    expect(await read(10)).toEqual(['e-11', 'e-12', 'e-13', 'e-14', 'e-15']);
    expect(await read(5)).toEqual(['e-6', 'e-7', 'e-8', 'e-9', 'e-10']);
    expect(await read(0)).toEqual(['e-1', 'e-2', 'e-3', 'e-4', 'e-5']);

    expect(log.reads).toEqual(['0+5', '5+5', '10+5', '0+5']);
  });

  it('reads the head of the log (a short page) again: events committed since are seen', async () => {
    const log = countingLog(3);
    const pages = new SharedPages(log.store, 4, 1024 * 1024);
    const first = pages.readLog(at(0), 5);
    log.answer();
    expect(await first).toHaveLength(3);
    log.append(2);
    const second = pages.readLog(at(0), 5);
    log.answer();

    expect((await second).map((e) => e.eventId)).toEqual(['e-1', 'e-2', 'e-3', 'e-4', 'e-5']);
    expect(log.reads).toEqual(['0+5', '0+5']);
  });

  it('keeps no more than its bytes of pages', async () => {
    const log = countingLog(20, 1000);
    // Room for one page of 5 events of ~1.5 KB, not two.
    const pages = new SharedPages(log.store, 4, 10_000);
    const read = async (from: number) => {
      const page = pages.readLog(at(from), 5);
      log.answer();
      await page;
    };
    for (const from of [0, 5, 5, 0]) await read(from);

    expect(log.reads).toEqual(['0+5', '5+5', '0+5']);
  });
});
