import { wholeLog } from '../support/whole-log';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import pino from 'pino';
import type { LockInfo } from '../../src/domain/state';
import { StateDocumentV4 } from '../../src/domain/terraform';
import { ProjectionHaltedError } from '../../src/application/ports/projection-admin.port';
import { ProjectionRunner } from '../../src/projections/projection-runner';
import { stateProjectors } from '../../src/projections/state';
import { LOG_START, RecordedEvent } from '../../src/domain/shared/event';
import type { Projector } from '../../src/projections/projector';
import { lockInfo, snapshotTables, StateHarness, testDocument } from '../support/state-harness';

/**
 * Events that older versions accepted but PostgreSQL could not hold, appended
 * exactly as those versions did (the decider took any command, the json
 * event column keeps anything): what the projectors and the runner do with
 * them, and that the recovery docs/operations.md describes works.
 */

interface LogLine {
  level: number;
  msg: string;
  projector?: string;
  position?: number;
}

function capturingLogger() {
  const lines: LogLine[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { logger: pino({ level: 'info' }, stream), lines };
}

/** A document whose one resource name is too long for any btree index entry. */
function unindexable(serial: number): StateDocumentV4 {
  const name = randomBytes(4500).toString('base64'); // incompressible, 6000 characters
  return testDocument(serial, [{ name: `n${name.replace(/[+/=]/g, 'x')}`, input: 'x' }]);
}

describe('events no read model could hold, written by older versions', () => {
  let h: StateHarness;

  beforeAll(async () => {
    h = await StateHarness.create();
  });

  afterAll(async () => {
    await h.close();
  });

  it('projects NUL and lone surrogates in lock info, lineage and terraform_version as U+FFFD', async () => {
    const evil: LockInfo = { ...lockInfo('L-evil'), Who: 'evil\u0000who', Operation: 'op\ud800' };
    const lockAt = await h.append({
      type: 'LockState',
      data: { name: 'legacy', newStateId: h.newStateId(), lockInfo: evil },
      metadata: h.context(),
    });
    const doc = { ...testDocument(1, [{ name: 'a', input: 'x' }]), lineage: 'lin\u0000eage' };
    doc.terraform_version = '1.11\u0000';
    const commitAt = await h.append(h.commitCommand('legacy', doc, { lockId: 'L-evil' }));
    // Stored as sent: the log keeps NUL exactly.
    const [stored] = await h.db.query<{ data: { info: LockInfo } }>(
      `SELECT data FROM kl_events WHERE type = 'LockAcquired' AND stream_id = 'state-legacy'`,
    );
    expect(stored.data.info).toEqual(evil);

    await h.runner.waitForPosition(lockAt!);
    await h.runner.waitForPosition(commitAt!);
    expect(await h.db.query('SELECT lock_id, who, operation, info FROM state_locks')).toEqual([
      {
        lock_id: 'L-evil',
        who: 'evil\uFFFDwho',
        operation: 'op\uFFFD',
        info: { ...evil, Who: 'evil\uFFFDwho', Operation: 'op\uFFFD' },
      },
    ]);
    expect(await h.db.query('SELECT lineage, terraform_version FROM state_versions')).toEqual([
      { lineage: 'lin\uFFFDeage', terraform_version: '1.11\uFFFD' },
    ]);
    // The document terraform reads back is exact.
    const served = await h.documents.current('legacy');
    expect(JSON.parse(served!.document).lineage).toBe('lin\u0000eage');
    await h.forceUnlock('legacy');
    expect(await h.db.query('SELECT count(*)::int AS n FROM state_locks')).toEqual([{ n: 0 }]);
  });

  describe('an event a projector cannot apply', () => {
    let poisonPosition: number;
    let runner: ProjectionRunner;
    let log: ReturnType<typeof capturingLogger>;

    beforeAll(async () => {
      log = capturingLogger();
      runner = h.newRunner(h.projectors, { logger: log.logger, recheckMs: 100 });
      await h.append(h.commitCommand('poisoned', unindexable(1)));
      const [poison] = await h.db.query<{ position: string }>(
        `SELECT global_position::text AS position FROM kl_events
          WHERE stream_id = 'state-poisoned' AND type = 'LifecycleOpened'`,
      );
      poisonPosition = Number(poison.position);
    });

    afterAll(async () => {
      await runner.stop();
    });

    it('halts that projector at the event, naming it, and lets the others catch up', async () => {
      const lifecycles = h.projectors.find((p) => p.name === 'state-resource-lifecycles')!;
      let halted: unknown;
      // Another test file's open transaction (same cluster) can hold the read
      // horizon below the event for a moment: run batches until one reaches it.
      for (let i = 0; i < 100 && halted === undefined; i++) {
        await runner.runBatch(lifecycles).catch((e: unknown) => (halted = e));
        if (halted === undefined) await new Promise((r) => setTimeout(r, 100));
      }
      expect(halted).toBeInstanceOf(ProjectionHaltedError);
      const expected = {
        projector: 'state-resource-lifecycles',
        position: poisonPosition,
        stream: 'state-poisoned',
        type: 'LifecycleOpened',
        reason: expect.stringMatching(/index row size .* exceeds .*\(54000\)$/),
      };
      expect((halted as ProjectionHaltedError).halt).toMatchObject(expected);
      expect(runner.halted()).toEqual([expect.objectContaining(expected)]);
      // Everything before the poison event was applied; nothing after it.
      const [cp] = await h.db.query<{ gp: string }>(
        `SELECT global_position::text AS gp FROM kl_checkpoints
          WHERE projection = 'state-resource-lifecycles'`,
      );
      expect(Number(cp.gp)).toBe(poisonPosition - 1);

      // A write now: the halted projector cannot reach it, and says so at once.
      const next = await h.append({
        type: 'LockState',
        data: { name: 'other', newStateId: h.newStateId(), lockInfo: lockInfo('L2') },
        metadata: h.context(),
      });
      const started = Date.now();
      await expect(runner.waitForPosition(next!)).rejects.toThrow(ProjectionHaltedError);
      expect(Date.now() - started).toBeLessThan(10_000);
      const reached = await runner.checkpoints();
      for (const name of ['state-catalog', 'state-raw']) {
        expect(reached.get(name)!.globalPosition).toBeGreaterThanOrEqual(next!.globalPosition);
      }
      expect(await h.catalog.lock('other')).toEqual(lockInfo('L2'));
    });

    it('logs the halt once, not at every recheck', async () => {
      runner.start();
      await new Promise((r) => setTimeout(r, 1500)); // ~15 rechecks
      const halts = log.lines.filter((l) => l.msg.startsWith('projection halted'));
      expect(halts).toHaveLength(1);
      expect(halts[0]).toMatchObject({ level: 50, position: poisonPosition });
      expect(runner.halted()).toHaveLength(1);
    });

    it('makes a rebuild fail naming the event, and changes nothing', async () => {
      const before = await snapshotTables(h.db);
      const rebuilding = h.newRunner(h.projectors, { logger: log.logger });
      const error = await rebuilding.rebuild().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ProjectionHaltedError);
      expect((error as Error).message).toContain(
        `projector state-resource-lifecycles cannot apply event ${poisonPosition} ` +
          '(LifecycleOpened on stream state-poisoned)',
      );
      // Nothing was swapped in: every read model is as it was.
      expect(await snapshotTables(h.db)).toEqual(before);
    });

    it('resumes once an operator skips the event, and rebuilds skip it too', async () => {
      await expect(runner.skip('state-resource-lifecycles', 999_999n, 'x')).rejects.toThrow(
        'no event at position 999999',
      );
      await expect(runner.skip('nope', BigInt(poisonPosition), 'x')).rejects.toThrow(
        'no projector named nope',
      );
      await runner.skip('state-resource-lifecycles', BigInt(poisonPosition), 'name too long');
      const head = (await wholeLog(h.events, () => h.events.readAll(LOG_START, 100_000))).at(
        -1,
      )!.position;
      await runner.waitForPosition(head);
      expect(runner.halted()).toEqual([]);
      expect(log.lines.filter((l) => l.msg === 'projection will skip an event')).toEqual([
        expect.objectContaining({
          projector: 'state-resource-lifecycles',
          position: poisonPosition,
        }),
      ]);
      expect(await runner.caughtUp()).toBe(true);

      const live = await snapshotTables(h.db);
      const report = await h.newRunner(stateProjectors(h.events), { logger: log.logger }).rebuild();
      expect(report.map((r) => r.projector)).toEqual([
        'state-resource-lifecycles',
        'state-catalog',
        'state-resource-edges',
        'state-raw',
        'resource-reservations',
      ]);
      expect(await snapshotTables(h.db)).toEqual(live);
    });
  });

  describe('a projector that fails', () => {
    /** Fails on LockAcquired with `failure` while it is set; counts its attempts. */
    class FlakyProjector implements Projector {
      readonly name = `flaky-${randomBytes(3).toString('hex')}`;
      readonly handles = ['LockAcquired'];
      readonly tables: string[] = [];
      failure: Error | null = null;
      attempts = 0;
      async apply(events: RecordedEvent[]): Promise<void> {
        this.attempts += events.length;
        if (this.failure) throw this.failure;
      }
    }

    it('retries a passing failure (a serialization failure) without halting', async () => {
      const flaky = new FlakyProjector();
      flaky.failure = Object.assign(new Error('could not serialize access'), { code: '40001' });
      const log = capturingLogger();
      const runner = h.newRunner([flaky], { logger: log.logger });
      runner.start();
      try {
        await new Promise((r) => setTimeout(r, 2500));
        expect(runner.halted()).toEqual([]);
        expect(flaky.attempts).toBeGreaterThan(1);
        // Logged once, however often it was retried.
        expect(log.lines.filter((l) => l.msg.includes('retrying'))).toHaveLength(1);
        flaky.failure = null;
        const whole = await wholeLog(h.events, () => h.events.readAll(LOG_START, 100_000));
        await runner.waitForPosition(whole.at(-1)!.position);
      } finally {
        await runner.stop();
      }
    });

    it('resumes by itself once the event applies again (e.g. fixed on another replica)', async () => {
      const flaky = new FlakyProjector();
      flaky.failure = new TypeError('cannot read properties of undefined');
      const log = capturingLogger();
      const runner = h.newRunner([flaky], { logger: log.logger, recheckMs: 100 });
      runner.start();
      try {
        for (let i = 0; i < 50 && runner.halted().length === 0; i++) {
          await new Promise((r) => setTimeout(r, 100));
        }
        expect(runner.halted()).toEqual([
          expect.objectContaining({
            type: 'LockAcquired',
            reason: 'cannot read properties of undefined',
          }),
        ]);
        flaky.failure = null;
        // Its next recheck (every 100 ms) applies the event: a recheck is a batch, which a
        // loaded machine does not always end within a fixed half second.
        for (let i = 0; i < 300 && runner.halted().length > 0; i++) {
          await new Promise((r) => setTimeout(r, 100));
        }
        expect(runner.halted()).toEqual([]);
        expect(log.lines.filter((l) => l.msg.startsWith('projection resumed'))).toHaveLength(1);
      } finally {
        await runner.stop();
      }
    });
  });
});
