import { Client } from 'pg';
import { ProjectionRunner } from '../../src/projections/projection-runner';
import type { Projector } from '../../src/projections/projector';
import { lockInfo, StateHarness, testDocument } from '../support/state-harness';

/**
 * A command waits for the read models its events feed, not for the others
 * (ProjectionRunner.waitForPosition with the appended types): a lock answers
 * while a read model fed only by commits is stuck, and shows in the lock
 * list when it does; without the types the same wait ends only once the
 * stuck one moves.
 */
describe('read-your-writes for the read models a command feeds', () => {
  let h: StateHarness;
  let holder: Client;
  let runner: ProjectionRunner;
  // Fed only by commits; its batches wait behind an advisory lock another session holds.
  const stuck: Projector = {
    name: 'stuck-commits',
    handles: ['ApplyCommitted'],
    tables: [],
    apply: () => Promise.resolve(),
  };

  beforeAll(async () => {
    h = await StateHarness.create();
    runner = h.newRunner([...h.projectors, stuck]);
    holder = new Client({ connectionString: h.db.url });
    await holder.connect();
    // The key ProjectionRunner's batches of `stuck` lock (namespace, hashtext(name)).
    await holder.query('SELECT pg_advisory_lock(7300422, hashtext($1))', [stuck.name]);
  });

  afterAll(async () => {
    await holder.end();
    await h.close();
  });

  it('answers a lock while a read model it does not feed is stuck, with the lock listed', async () => {
    const position = await h.append({
      type: 'LockState',
      data: { name: 'net', newStateId: h.newStateId(), lockInfo: lockInfo('L-1') },
      metadata: h.context(),
    });
    // Waiting for every read model cannot end while one is stuck.
    let all = false;
    const waitingForAll = runner.waitForPosition(position!).then(() => (all = true));
    await runner.waitForPosition(position!, ['StateCreated', 'LockAcquired']);
    const locks = await h.db.query<{ lock_id: string }>('SELECT lock_id FROM state_locks');
    expect(locks.map((l) => l.lock_id)).toEqual(['L-1']);
    expect(all).toBe(false);
    await holder.query('SELECT pg_advisory_unlock(7300422, hashtext($1))', [stuck.name]);
    await waitingForAll;
    expect(all).toBe(true);
  });
  it('is ready while a read model trails only by events it does not handle, and not while one it handles waits', async () => {
    await holder.query('SELECT pg_advisory_lock(7300422, hashtext($1))', [stuck.name]);
    const position = await h.append({
      type: 'LockState',
      data: { name: 'ready', newStateId: h.newStateId(), lockInfo: lockInfo('L-2') },
      metadata: h.context(),
    });
    await runner.waitForPosition(position!, ['StateCreated', 'LockAcquired']);
    expect(await runner.reached(position!)).toBe(false);
    expect(await runner.caughtUp()).toBe(true);

    // A commit feeds the stuck read model: not ready until it has applied it.
    const committed = await h.append(
      h.commitCommand('other', testDocument(1, [{ name: 'a', input: 'x' }])),
    );
    await runner.waitForPosition(committed!, ['StateCreated', 'LifecycleOpened']);
    expect(await runner.caughtUp()).toBe(false);
    await holder.query('SELECT pg_advisory_unlock(7300422, hashtext($1))', [stuck.name]);
    await runner.waitForPosition(committed!);
    expect(await runner.caughtUp()).toBe(true);
  });
});
