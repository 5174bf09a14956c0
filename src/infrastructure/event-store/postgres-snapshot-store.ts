import { Snapshot, SnapshotStore, SnapshotText } from '../../application/ports/snapshot-store.port';
import { Database } from '../postgres/database';

export class PostgresSnapshotStore implements SnapshotStore {
  constructor(private readonly db: Database) {}

  async load(streamId: string): Promise<Snapshot | null> {
    const rows = await this.db.query<{ revision: string; schema: string; state: unknown }>(
      'SELECT revision, schema, state FROM kl_snapshots WHERE stream_id = $1',
      [streamId],
    );
    if (!rows.length) return null;
    return { revision: BigInt(rows[0].revision), schema: rows[0].schema, state: rows[0].state };
  }

  async save(streamId: string, snapshot: SnapshotText): Promise<void> {
    // Never move a snapshot backwards: a slower replica may save an older one.
    await this.db.query(
      `INSERT INTO kl_snapshots (stream_id, revision, schema, state) VALUES ($1, $2, $3, $4)
       ON CONFLICT (stream_id) DO UPDATE
         SET revision = EXCLUDED.revision, schema = EXCLUDED.schema, state = EXCLUDED.state,
             updated_at = now()
       WHERE kl_snapshots.revision < EXCLUDED.revision OR kl_snapshots.schema <> EXCLUDED.schema`,
      [streamId, snapshot.revision.toString(), snapshot.schema, snapshot.json],
    );
  }
}
