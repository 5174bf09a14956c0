import { randomUUID } from 'node:crypto';
import { comparePositions, LogPosition, RecordedEvent } from '../../src/domain/shared/event';
import { ProjectionRunner } from '../../src/projections/projection-runner';
import type { Projector } from '../../src/projections/projector';
import { lockInfo, StateHarness, testDocument } from '../support/state-harness';

/**
 * A projector's loop may leave its checkpoint behind appends of its own
 * process that hold no event it handles, while more keep coming (one commit
 * per push instead of one per request): it still gets past them once the
 * appends pause, a command whose events it handles takes those appends with
 * its own in one batch, and a wait for every read model still ends.
 */
describe('a projector loop and the appends it passes over', () => {
  let h: StateHarness;
  let runner: ProjectionRunner;
  const applied: RecordedEvent[] = [];
  const commitsOnly: Projector = {
    name: 'commits-only',
    handles: ['ApplyCommitted'],
    tables: [],
    apply: (events) => {
      applied.push(...events);
      return Promise.resolve();
    },
  };

  beforeAll(async () => {
    h = await StateHarness.create();
    runner = h.newRunner([...h.projectors, commitsOnly]);
    runner.start();
  });

  afterAll(async () => {
    await runner.stop();
    await h.close();
  });

  async function lockAndUnlock(name: string, id: string): Promise<LogPosition> {
    const locked = await h.append({
      type: 'LockState',
      data: { name, newStateId: h.newStateId(), lockInfo: lockInfo(id) },
      metadata: h.context(),
    });
    await runner.waitForPosition(locked!, ['StateCreated', 'LockAcquired']);
    const unlocked = await h.append({
      type: 'UnlockState',
      data: { name, lockId: id },
      metadata: h.context(),
    });
    await runner.waitForPosition(unlocked!, ['LockReleased']);
    return unlocked!;
  }

  async function checkpointOf(name: string): Promise<LogPosition | undefined> {
    return (await runner.checkpoints()).get(name);
  }

  it('gets past a run of locks once the appends pause, with nothing waiting for it', async () => {
    let last: LogPosition | undefined;
    for (let i = 0; i < 6; i++) last = await lockAndUnlock('burst', `B-${i}`);
    let at = await checkpointOf(commitsOnly.name);
    for (const deadline = Date.now() + 20_000; Date.now() < deadline;) {
      if (at !== undefined && comparePositions(at, last!) >= 0) break;
      await new Promise((r) => setTimeout(r, 50));
      at = await checkpointOf(commitsOnly.name);
    }
    expect(comparePositions(at!, last!)).toBeGreaterThanOrEqual(0);
    expect(applied).toEqual([]);
    expect(await runner.caughtUp()).toBe(true);
  });

  it('applies a commit that follows locks it passed over, and a wait for every read model ends', async () => {
    await lockAndUnlock('mixed', 'M-1');
    const committed = await h.append(
      h.commitCommand('mixed', testDocument(1, [{ name: 'a', input: 'x' }])),
    );
    await runner.waitForPosition(committed!, ['StateCreated', 'ApplyCommitted', 'LifecycleOpened']);
    expect(comparePositions((await checkpointOf(commitsOnly.name))!, committed!)).toBe(0);
    expect(applied.map((e) => e.type)).toEqual(['ApplyCommitted']);
    expect(applied[0].position.transactionId).toBe(committed!.transactionId);

    const last = await lockAndUnlock('mixed', 'M-2');
    await runner.waitForPosition(last);
    expect(await runner.reached(last)).toBe(true);
    expect(comparePositions((await checkpointOf(commitsOnly.name))!, last)).toBe(0);
  });

  it('looks at the log only once a bulk append being written is over', async () => {
    const before = (await h.events.lastPosition())!;
    // The append is held after its announcement, before its rows: its COPY
    // waits for a lock another session holds.
    const blocker = await h.t.db.pool.connect();
    let announced!: () => void;
    const inFlight = new Promise<void>((resolve) => (announced = resolve));
    const unwatch = h.events.watchAppends(() => announced());
    const reads = jest.spyOn(h.events, 'readAll');
    let appending: Promise<unknown> | undefined;
    try {
      await blocker.query('BEGIN; LOCK TABLE kl_events IN SHARE MODE');
      appending = h.events.appendToStream(
        'bulk-noted',
        Array.from({ length: 1200 }, (_, i) => ({
          eventId: randomUUID(),
          type: 'Noted',
          schemaVersion: 1,
          data: { i },
          metadata: {
            actor: 'alice',
            correlationId: 'bulk',
            causationId: null,
            occurredAt: new Date().toISOString(),
          },
        })),
        { expectedRevision: 'no_stream' },
      );
      await inFlight;
      reads.mockClear();
      // Over two of the loops' polls (every 250 ms) while the append waits.
      await new Promise((r) => setTimeout(r, 700));
      expect(reads).not.toHaveBeenCalled();
    } finally {
      await blocker.query('COMMIT');
      blocker.release();
      unwatch();
      reads.mockRestore();
    }
    const appended = (await appending) as { position: LogPosition };
    expect(comparePositions(appended.position, before)).toBeGreaterThan(0);
    // Then every loop gets past it, with nothing waiting for it (all at
    // once, when the wait for a writer that never comes is over).
    let at = await checkpointOf(commitsOnly.name);
    let caughtUp = await runner.caughtUp();
    for (const deadline = Date.now() + 20_000; Date.now() < deadline;) {
      if (at !== undefined && comparePositions(at, appended.position) >= 0 && caughtUp) break;
      await new Promise((r) => setTimeout(r, 50));
      at = await checkpointOf(commitsOnly.name);
      caughtUp = await runner.caughtUp();
    }
    expect(comparePositions(at!, appended.position)).toBe(0);
    expect(caughtUp).toBe(true);
  });
});
