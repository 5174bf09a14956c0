import pino from 'pino';
import type { Client, Pool, PoolClient } from 'pg';
import { ReadModelGuard, ReadModelsRebuildingError } from './unlogged-read-models';

/** A client that answers the marker question with `intact` and records what reached it. */
function fakeClient(intact: boolean) {
  const sent: string[] = [];
  const client = {
    query: (...args: unknown[]): unknown => {
      const first = args[0] as string | { text: string };
      const text = typeof first === 'string' ? first : first.text;
      sent.push(text);
      const result = { rows: [{ intact }] };
      const callback = args.find((a) => typeof a === 'function') as
        ((err: Error | null, r: unknown) => void) | undefined;
      if (callback) return void callback(null, result);
      if (typeof (first as { submit?: unknown }).submit === 'function') return first;
      return Promise.resolve(result);
    },
  };
  return { client: client as unknown as PoolClient, sent };
}

async function verified(guard: ReadModelGuard, intact: boolean) {
  const fake = fakeClient(intact);
  await new Promise<void>((resolve, reject) =>
    guard.verify(fake.client, (err) => (err ? reject(err) : resolve())),
  );
  fake.sent.length = 0;
  return fake;
}

async function guardKnowing(
  names: string[],
  functions: string[] = [],
  connect?: () => Promise<Client>,
): Promise<ReadModelGuard> {
  const guard = new ReadModelGuard(pino({ level: 'silent' }), connect);
  const rows = [
    ...names.map((name) => ({ name, fn: false, home: 'public' })),
    ...functions.map((name) => ({ name, fn: true, home: 'public' })),
  ];
  const pool = { query: () => Promise.resolve({ rows }) } as unknown as Pool;
  await guard.learnNames(pool);
  return guard;
}

/**
 * The guard's own connection, standing in for PostgreSQL: a statement
 * prepared locks a read model when its text is in `touching`; one in
 * `unpreparable` is refused as PostgreSQL refuses `COPY`. Records the
 * statements prepared.
 */
function prober(touching: string[], unpreparable: string[] = []) {
  const prepared: string[] = [];
  let last = '';
  let fail = false;
  const client = {
    query: (q: string | { text: string }) => {
      const text = typeof q === 'string' ? q : q.text;
      if (fail) return Promise.reject(new Error('connection terminated'));
      if (text.startsWith('PREPARE kl_guard_probe AS ')) {
        last = text.slice('PREPARE kl_guard_probe AS '.length);
        prepared.push(last);
        if (unpreparable.includes(last)) {
          return Promise.reject(Object.assign(new Error('syntax error'), { code: '42601' }));
        }
      }
      if (text.includes('pg_locks')) {
        return Promise.resolve({ rows: [{ touched: touching.includes(last) }] });
      }
      return Promise.resolve({ rows: [] });
    },
    end: () => Promise.resolve(),
  };
  return {
    connect: () => Promise.resolve(client as unknown as Client),
    prepared,
    failing: (yes: boolean) => (fail = yes),
  };
}

describe('ReadModelGuard', () => {
  it('lets everything through while the marker has its row', async () => {
    const guard = await guardKnowing(['resources']);
    const { client, sent } = await verified(guard, true);
    await client.query('SELECT * FROM resources');
    expect(guard.lost).toBe(false);
    expect(() => guard.assertIntact()).not.toThrow();
    expect(sent).toEqual(['SELECT * FROM resources']);
  });

  it('without the row, refuses statements naming a read model in every form, before they are sent', async () => {
    const guard = await guardKnowing(['resources', 'raw_state', 'resources_at']);
    const lost = jest.fn();
    guard.whenLost(lost);
    const { client, sent } = await verified(guard, false);
    expect([guard.lost, lost.mock.calls.length]).toEqual([true, 1]);

    await expect(client.query('SELECT count(*) FROM Resources')).rejects.toBeInstanceOf(
      ReadModelsRebuildingError,
    );
    const viaCallback = await new Promise<unknown>((resolve) =>
      (client.query as unknown as (t: string, v: unknown[], cb: (e: unknown) => void) => void)(
        'SELECT * FROM resources_at($1, $2)',
        [],
        resolve,
      ),
    );
    expect(viaCallback).toBeInstanceOf(ReadModelsRebuildingError);
    const copy = { text: 'COPY raw_state FROM STDIN', submit: () => undefined };
    expect(() => client.query(copy as never)).toThrow(ReadModelsRebuildingError);
    expect(() => guard.assertIntact()).toThrow(/read models are being rebuilt/);

    // other tables, and a column that only starts like one, are not read models
    await client.query('SELECT * FROM kl_checkpoints');
    await client.query('SELECT max_resources FROM quotas');
    expect(sent).toEqual(['SELECT * FROM kl_checkpoints', 'SELECT max_resources FROM quotas']);
  });

  it('lets the rebuild through while lost, and everyone once restored', async () => {
    const guard = await guardKnowing(['resources']);
    const { client, sent } = await verified(guard, false);
    await guard.exempt(async () => {
      await client.query('INSERT INTO resources VALUES (1)');
      guard.assertIntact();
    });
    await expect(client.query('SELECT * FROM resources')).rejects.toThrow();
    guard.restored();
    await client.query('SELECT * FROM resources');
    expect(sent).toEqual(['INSERT INTO resources VALUES (1)', 'SELECT * FROM resources']);
    expect(guard.lost).toBe(false);
  });

  it('exempts only while the exempt work runs: not what it left running, and again the next time', async () => {
    const guard = await guardKnowing(['resources']);
    const fake = fakeClient(true);
    await new Promise<void>((resolve) => guard.verify(fake.client, () => resolve()));
    let leftRunning: Promise<unknown> = Promise.resolve();
    let go = () => {};
    await guard.exempt(async () => {
      leftRunning = new Promise<void>((resolve) => (go = resolve)).then(() =>
        fake.client.query('SELECT * FROM resources'),
      );
    });
    // The read models are lost after the exempt work ended (a start-up's, say).
    const { client, sent } = await verified(guard, false);
    go();
    await expect(leftRunning).rejects.toBeInstanceOf(ReadModelsRebuildingError);
    await guard.exempt(() => client.query('INSERT INTO resources VALUES (2)'));
    await expect(client.query('SELECT * FROM resources')).rejects.toThrow();
    expect(sent).toEqual(['INSERT INTO resources VALUES (2)']);
  });

  it('once restored, exempts nothing the rebuild left running when the read models are lost again', async () => {
    const guard = await guardKnowing(['resources']);
    const { client, sent } = await verified(guard, false);
    let leftRunning: Promise<unknown> = Promise.resolve();
    let go = () => {};
    await guard.exempt(async () => {
      leftRunning = new Promise<void>((resolve) => (go = resolve)).then(() =>
        client.query('SELECT * FROM resources'),
      );
    });
    guard.restored();
    // Another crash after the rebuild: what it left running reads only now.
    await verified(guard, false);
    go();
    await expect(leftRunning).rejects.toBeInstanceOf(ReadModelsRebuildingError);
    expect(sent).toEqual([]);
  });

  it("refuses a guarded pool's own query before it takes a connection, and lets the rest through", async () => {
    const guard = await guardKnowing(['resources']);
    const sent: string[] = [];
    const pool = {
      query: (text: string | { text: string }) => {
        sent.push(typeof text === 'string' ? text : text.text);
        return Promise.resolve({ rows: [] });
      },
    };
    guard.guardPool(pool as unknown as Pool);
    await pool.query('SELECT * FROM resources');
    await verified(guard, false); // a new connection finds the read models emptied
    await expect(pool.query('SELECT count(*) FROM resources')).rejects.toBeInstanceOf(
      ReadModelsRebuildingError,
    );
    await expect(
      pool.query({ text: 'SELECT * FROM resources WHERE id = $1' }),
    ).rejects.toBeInstanceOf(ReadModelsRebuildingError);
    await pool.query('SELECT * FROM kl_checkpoints');
    await guard.exempt(() => pool.query('INSERT INTO resources VALUES (3)'));
    expect(sent).toEqual([
      'SELECT * FROM resources',
      'SELECT * FROM kl_checkpoints',
      'INSERT INTO resources VALUES (3)',
    ]);
  });

  it('refuses every statement while lost when the names are not known yet', async () => {
    const guard = new ReadModelGuard(pino({ level: 'silent' }));
    const { client } = await verified(guard, false);
    await expect(client.query('SELECT 1')).rejects.toBeInstanceOf(ReadModelsRebuildingError);
  });

  it('while lost, sends what PostgreSQL says touches no read model, asking once per text', async () => {
    const reads = 'SELECT v.outputs FROM state_versions v JOIN outputs o USING (state_id)';
    const column = 'SELECT version, outputs FROM state_versions WHERE state_id = $1';
    const pg = prober([reads, 'INSERT INTO outputs VALUES ($1)']);
    const guard = await guardKnowing(['outputs'], [], pg.connect);
    const { client, sent } = await verified(guard, false);

    await Promise.all([client.query(column, ['s']), client.query(column, ['t'])]);
    await client.query(column, ['u']);
    await expect(client.query(reads)).rejects.toBeInstanceOf(ReadModelsRebuildingError);
    await expect(client.query('INSERT INTO outputs VALUES ($1)', [1])).rejects.toBeInstanceOf(
      ReadModelsRebuildingError,
    );
    const viaCallback = await new Promise<unknown>((resolve) =>
      (client.query as unknown as (t: string, v: unknown[], cb: (e: unknown) => void) => void)(
        reads,
        [],
        resolve,
      ),
    );
    expect(viaCallback).toBeInstanceOf(ReadModelsRebuildingError);
    expect(sent).toEqual([column, column, column]);
    expect(pg.prepared).toEqual([column, reads, 'INSERT INTO outputs VALUES ($1)']);
  });

  it("while lost, keeps a connection's statements in the order they were sent while one waits for its verdict", async () => {
    const column = 'SELECT version, outputs FROM state_versions WHERE state_id = $1';
    const pg = prober([]);
    const guard = await guardKnowing(['outputs'], [], pg.connect);
    const { client, sent } = await verified(guard, false);

    // The second statement names no read model and needs no verdict: it
    // still goes after the first, which waits for PostgreSQL's.
    await Promise.all([
      client.query(column, ['s']),
      client.query('SELECT 1'),
      client.query('COMMIT'),
    ]);
    expect(sent).toEqual([column, 'SELECT 1', 'COMMIT']);
    // Nothing held any more: the next goes at once.
    const next = client.query('SELECT 2');
    expect(sent).toEqual([column, 'SELECT 1', 'COMMIT', 'SELECT 2']);
    await next;
  });

  it('while lost, refuses without asking a call of a function over the read models and a COPY', async () => {
    const pg = prober([]);
    const guard = await guardKnowing(['resources', 'resources_at'], ['resources_at'], pg.connect);
    const { client, sent } = await verified(guard, false);
    await expect(client.query('SELECT * FROM resources_at($1, $2)')).rejects.toBeInstanceOf(
      ReadModelsRebuildingError,
    );
    const copy = { text: 'COPY resources FROM STDIN', submit: () => undefined };
    expect(() => client.query(copy as never)).toThrow(ReadModelsRebuildingError);
    expect([sent, pg.prepared]).toEqual([[], []]);
  });

  it('while lost, refuses what PostgreSQL cannot prepare, and what it could not be asked about', async () => {
    const analyze = 'ANALYZE resources';
    const pg = prober([], [analyze]);
    const guard = await guardKnowing(['resources'], [], pg.connect);
    const { client, sent } = await verified(guard, false);
    await expect(client.query(analyze)).rejects.toBeInstanceOf(ReadModelsRebuildingError);
    await expect(client.query(analyze)).rejects.toBeInstanceOf(ReadModelsRebuildingError);
    pg.failing(true);
    const count = 'SELECT count(*) AS resources FROM states';
    await expect(client.query(count)).rejects.toBeInstanceOf(ReadModelsRebuildingError);
    pg.failing(false); // a failed question is not kept: asked again, and sent
    await client.query(count);
    expect(sent).toEqual([count]);
    expect(pg.prepared).toEqual([analyze, count]);
  });

  it('asks nothing while the read models are whole', async () => {
    const pg = prober([]);
    const guard = await guardKnowing(['outputs'], [], pg.connect);
    const { client, sent } = await verified(guard, true);
    await client.query('SELECT * FROM outputs');
    expect([sent, pg.prepared]).toEqual([['SELECT * FROM outputs'], []]);
  });

  it("refuses, while lost, a query role's transaction by the read models it locked", async () => {
    const guard = await guardKnowing(['resources']);
    const locked = (touched: boolean) =>
      ({ query: () => Promise.resolve({ rows: [{ touched }] }) }) as unknown as PoolClient;
    await guard.assertUntouched(locked(true)); // whole: nothing asked
    await verified(guard, false);
    await guard.assertUntouched(locked(false));
    await expect(guard.assertUntouched(locked(true))).rejects.toBeInstanceOf(
      ReadModelsRebuildingError,
    );
  });
});
