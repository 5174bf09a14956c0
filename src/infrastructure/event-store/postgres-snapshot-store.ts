import { Snapshot, SnapshotStore, SnapshotText } from '../../application/ports/snapshot-store.port';
import { Database } from '../postgres/database';

export interface SnapshotPacing {
  /** True while other callers' statements are in flight. */
  othersBusy(): boolean;
  /** Longest a snapshot waits for them before it is written anyway (default 2 s). */
  maxWaitMs?: number;
}

/** How often a waiting snapshot looks whether the others are done. */
const QUIET_POLL_MS = 10;
/**
 * How long nothing else must have been in flight: one request's statements
 * come with gaps between them (its decision, the next round trip), and a
 * snapshot started in such a gap would share the cores with the rest of it.
 */
const QUIET_FOR_MS = 50;

export class PostgresSnapshotStore implements SnapshotStore {
  constructor(
    private readonly db: Database,
    private readonly pacing: SnapshotPacing | null = null,
  ) {}

  async load(streamId: string): Promise<Snapshot | null> {
    const rows = await this.db.query<{ revision: string; schema: string; state: unknown }>(
      'SELECT revision, schema, state FROM kl_snapshots WHERE stream_id = $1',
      [streamId],
    );
    if (!rows.length) return null;
    return { revision: BigInt(rows[0].revision), schema: rows[0].schema, state: rows[0].state };
  }

  async save(streamId: string, snapshot: SnapshotText): Promise<void> {
    await this.quietMoment();
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

  /**
   * A snapshot is only a faster load later, and a big one is a costly row
   * (PostgreSQL compresses 2-3 MB of text at 20,000 instances, 0.1-0.5 s of a
   * core, then flushes it to the WAL): it waits until no other statement is
   * in flight, so a caller's command right after a big commit does not share
   * the cores with it. Bounded: under steady traffic it is written anyway.
   */
  private async quietMoment(): Promise<void> {
    if (this.pacing === null) return;
    const until = Date.now() + (this.pacing.maxWaitMs ?? 2000);
    let quietSince = this.pacing.othersBusy() ? null : Date.now();
    while (Date.now() < until) {
      if (quietSince !== null && Date.now() - quietSince >= QUIET_FOR_MS) return;
      await new Promise((r) => setTimeout(r, QUIET_POLL_MS));
      if (this.pacing.othersBusy()) quietSince = null;
      else quietSince ??= Date.now();
    }
  }
}
