import { Client } from 'pg';
import { ProjectionHaltedError } from '../../src/application/ports/projection-admin.port';
import type { LogPosition, RecordedEvent } from '../../src/domain/shared/event';
import type { Projector } from '../../src/projections/projector';
import { CHECKPOINTS_CHANNEL } from '../../src/projections/projection-runner';
import type { Queryable } from '../../src/infrastructure/postgres/database';
import { lockInfo, StateHarness } from '../support/state-harness';

/**
 * A command waits for the read models its events feed; they catch up in one
 * transaction (one commit, not one per read model). One that fails on the
 * command's events neither holds up nor spoils the others: they still show
 * the write, and it halts at the event as it would alone.
 */
describe('the read models a command feeds, caught up together', () => {
  let h: StateHarness;
  const types = ['StateCreated', 'LockAcquired'];

  /** A read model of locks that notes the transaction each lock was applied in. */
  function spy(name: string, failOn?: string): Projector & { seen: Map<string, string> } {
    const seen = new Map<string, string>();
    return {
      name,
      handles: ['LockAcquired'],
      tables: [],
      seen,
      async apply(events: RecordedEvent[], tx: Queryable) {
        const [{ xid }] = (
          await tx.query<{ xid: string }>('SELECT pg_current_xact_id()::text AS xid')
        ).rows;
        for (const e of events) {
          const { lockId } = e.data as { lockId: string };
          if (lockId === failOn) throw new Error(`${name} cannot hold ${lockId}`);
          seen.set(lockId, xid);
        }
      },
    };
  }

  const lock = (state: string, id: string) =>
    h.append({
      type: 'LockState',
      data: { name: state, newStateId: h.newStateId(), lockInfo: lockInfo(id) },
      metadata: h.context(),
    });

  const locks = async () =>
    (await h.db.query<{ lock_id: string }>('SELECT lock_id FROM state_locks ORDER BY 1')).map(
      (l) => l.lock_id,
    );

  /** A runner over these projectors with every read model at the log's end. */
  async function caughtUpRunner(projectors: Projector[]) {
    const runner = h.newRunner([...h.projectors, ...projectors]);
    await runner.waitForPosition((await h.events.lastPosition())!);
    return runner;
  }

  /**
   * A read model of locks with a table of its own; on `moveOn` another
   * process (here: another connection) applies the same event first and
   * moves the checkpoint past it, while this batch is still open.
   */
  function rival(name: string, moveOn: string, to: () => LogPosition): Projector {
    return {
      name,
      handles: ['LockAcquired'],
      tables: [],
      async apply(events: RecordedEvent[], tx: Queryable) {
        for (const e of events) {
          const { lockId } = e.data as { lockId: string };
          await tx.query('INSERT INTO rival_locks (projector, lock_id) VALUES ($1, $2)', [
            name,
            lockId,
          ]);
          if (lockId !== moveOn) continue;
          const at = to();
          await h.db.query(
            `UPDATE kl_checkpoints SET transaction_id = $2::xid8, global_position = $3
              WHERE projection = $1`,
            [name, at.transactionId.toString(), at.globalPosition.toString()],
          );
        }
      },
    };
  }

  beforeAll(async () => {
    h = await StateHarness.create();
    await h.db.query('CREATE TABLE rival_locks (projector text, lock_id text)');
    await lock('warm', 'W-0'); // a log to be at the end of
  });

  afterAll(() => h.close());

  it('applies a command to every read model it feeds in one transaction', async () => {
    const [a, b] = [spy('spy-a'), spy('spy-b')];
    const runner = await caughtUpRunner([a, b]);
    const position = await lock('net', 'L-1');
    await runner.waitForPosition(position!, types);
    expect(await locks()).toEqual(['L-1', 'W-0']);
    expect(a.seen.get('L-1')).toBeDefined();
    expect(b.seen.get('L-1')).toBe(a.seen.get('L-1'));
  });

  it('announces the move of each checkpoint to the other processes as it commits', async () => {
    const listener = new Client({ connectionString: h.t.url });
    await listener.connect();
    const announced: string[] = [];
    listener.on('notification', (n) => announced.push(n.payload ?? ''));
    try {
      await listener.query(`LISTEN ${CHECKPOINTS_CHANNEL}`);
      const runner = await caughtUpRunner([spy('spy-heard-a'), spy('spy-heard-b')]);
      // A first command's read models are caught up one by one; the next one's together.
      await runner.waitForPosition((await lock('heard-warm', 'L-4-warm'))!, types);
      announced.length = 0;
      const position = await lock('heard', 'L-4');
      await runner.waitForPosition(position!, types);
      for (
        let i = 0;
        i < 200 && !(announced.includes('spy-heard-a') && announced.includes('spy-heard-b'));
        i++
      ) {
        await new Promise((r) => setTimeout(r, 10));
      }
      expect(announced).toEqual(expect.arrayContaining(['spy-heard-a', 'spy-heard-b']));
    } finally {
      await listener.end();
    }
  });

  it('keeps none of the rows of a read model whose checkpoint moved while they were written', async () => {
    const lockedAt: { position?: LogPosition } = {};
    const runner = await caughtUpRunner([rival('spy-rival', 'L-3', () => lockedAt.position!)]);
    // A first command's read models are caught up one by one; the next one's together.
    await runner.waitForPosition((await lock('rival-warm', 'L-3-warm'))!, types);
    const position = (await lock('rival', 'L-3'))!;
    lockedAt.position = position;
    await runner.waitForPosition(position, types);
    // The other process applied it: the batch that found its checkpoint
    // moved at commit kept nothing, and nothing applied it twice.
    expect(
      await h.db.query('SELECT 1 FROM rival_locks WHERE projector = $1 AND lock_id = $2', [
        'spy-rival',
        'L-3',
      ]),
    ).toEqual([]);
    expect(await locks()).toContain('L-3');
    const [cp] = await h.db.query<{ gp: string }>(
      'SELECT global_position AS gp FROM kl_checkpoints WHERE projection = $1',
      ['spy-rival'],
    );
    expect(cp.gp).toBe(position.globalPosition.toString());
  });

  it('lets the others show the write when one read model fails on it, and halts that one', async () => {
    const good = spy('spy-good');
    const bad = spy('spy-bad', 'L-2');
    const runner = await caughtUpRunner([good, bad]);
    const position = await lock('app', 'L-2');
    await expect(runner.waitForPosition(position!, types)).rejects.toThrow(ProjectionHaltedError);
    // Asked again, the others are at the write by the time it answers.
    await expect(runner.waitForPosition(position!, types)).rejects.toThrow(ProjectionHaltedError);
    expect(await locks()).toEqual(['L-1', 'L-2', 'L-3', 'L-3-warm', 'L-4', 'L-4-warm', 'W-0']);
    expect(good.seen.has('L-2')).toBe(true);
    expect(bad.seen.has('L-2')).toBe(false);
    expect(runner.halted()).toEqual([
      expect.objectContaining({ projector: 'spy-bad', position: Number(position!.globalPosition) }),
    ]);
  });

  it('asks for the held append while the transaction opens, not after its BEGIN', async () => {
    const runner = await caughtUpRunner([spy('spy-early-a'), spy('spy-early-b')]);
    // A first command's read models are caught up one by one; the next one's together.
    await runner.waitForPosition((await lock('early-warm', 'L-5-warm'))!, types);
    const order: string[] = [];
    const readAppended = h.events.readAppended.bind(h.events);
    const transaction = h.db.transaction.bind(h.db);
    const read = jest
      .spyOn(h.events, 'readAppended')
      .mockImplementation((...args) => (order.push('read'), readAppended(...args)));
    const open = jest
      .spyOn(h.db, 'transaction')
      .mockImplementation((...args) => (order.push('transaction'), transaction(...args)));
    try {
      const position = await lock('early', 'L-5');
      await runner.waitForPosition(position!, types);
    } finally {
      read.mockRestore();
      open.mockRestore();
    }
    expect(await locks()).toContain('L-5');
    // The appends are read before the transaction is opened, and not again in it.
    const opened = order.indexOf('transaction');
    expect(opened).toBeGreaterThan(0);
    expect(order.slice(opened + 1)).toEqual([]);
  });

  it('waits for the WAL flush of their commit only while the read models are logged', async () => {
    // Unlogged read models are emptied by a crash and rebuilt from the log,
    // so a commit a crash takes away is rebuilt with them; logged ones
    // survive it as they were, so their commits stay durable.
    const durability = async (unloggedReadModels: boolean, id: string) => {
      const settings: string[] = [];
      const probe = (name: string): Projector => ({
        name,
        handles: ['LockAcquired'],
        tables: [],
        async apply(_events: RecordedEvent[], tx: Queryable) {
          const { rows } = await tx.query<{ s: string }>(
            "SELECT current_setting('synchronous_commit') AS s",
          );
          settings.push(rows[0].s);
        },
      });
      const runner = h.newRunner([...h.projectors, probe(`sync-a-${id}`), probe(`sync-b-${id}`)], {
        unloggedReadModels,
      });
      await runner.waitForPosition((await h.events.lastPosition())!);
      // A first command's read models are caught up one by one; the next one's together.
      await runner.waitForPosition((await lock(`sync-${id}-warm`, `${id}-warm`))!, types);
      settings.length = 0;
      await runner.waitForPosition((await lock(`sync-${id}`, id))!, types);
      return settings;
    };
    expect(await durability(true, 'S-1')).toEqual(['off', 'off']);
    expect(await durability(false, 'S-2')).toEqual(['on', 'on']);
  });
});
