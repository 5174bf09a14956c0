import { createTestDatabase, TestDatabase } from '../../../test/support/test-database';

/**
 * A projector batch sends its checkpoint's move together with its COMMIT
 * (migration 035): a move that misses must keep the whole batch out.
 */
describe('a checkpoint moved with the COMMIT', () => {
  let t: TestDatabase;
  beforeAll(async () => (t = await createTestDatabase()));
  afterAll(async () => t.drop());

  const position = async (name: string) =>
    (
      await t.db.query<{ tx: string; gp: string }>(
        `SELECT transaction_id::text AS tx, global_position::text AS gp FROM kl_checkpoints
          WHERE projection = $1`,
        [name],
      )
    ).map((r) => `${r.tx}/${r.gp}`);

  const batch = (name: string, from: string, to: string, written: string) =>
    t.db.transaction(async (tx, _opened, commitWith) => {
      // Stands for the batch's rows: another projector's checkpoint row.
      await tx.query('INSERT INTO kl_checkpoints (projection) VALUES ($1)', [written]);
      const [fromTx, fromGp] = from.split('/');
      const [toTx, toGp] = to.split('/');
      commitWith(
        `SELECT kl_move_checkpoint('${name}', '${fromTx}'::xid8, ${fromGp}, '${toTx}'::xid8, ${toGp}, 'kl_checkpoints')`,
      );
    });

  it('commits the rows and the move together when the checkpoint is where the batch read it', async () => {
    await t.db.query(`INSERT INTO kl_checkpoints (projection) VALUES ('moved-here')`);
    const [at] = await position('moved-here');
    await batch('moved-here', at, '7/42', 'moved-here-rows');
    expect(await position('moved-here')).toEqual(['7/42']);
    expect(await position('moved-here-rows')).toHaveLength(1);
  });

  it('refuses the move, and commits none of the rows, when the checkpoint moved meanwhile', async () => {
    await t.db.query(`INSERT INTO kl_checkpoints (projection) VALUES ('raced')`);
    const [at] = await position('raced');
    await batch('raced', at, '5/9', 'raced-first');
    // A second batch read the checkpoint before the first one moved it.
    await expect(batch('raced', at, '6/12', 'raced-second')).rejects.toMatchObject({
      code: '40001',
      message: 'checkpoint of raced moved under us',
    });
    expect(await position('raced')).toEqual(['5/9']);
    expect(await position('raced-second')).toEqual([]);
  });
});
