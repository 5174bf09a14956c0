import type { LogPosition } from '../../domain/shared/event';
import type { Database } from '../postgres/database';

/**
 * The two projections a past version is read from: `state_versions` (its
 * row) and `resources` (its instances). They are separate projectors with
 * checkpoints of their own, so a version is listed before its lifecycles
 * are written whenever the versions' projector gets to a commit first (a
 * read on any replica while the commit is being projected).
 */
export interface VersionProjections {
  /** The projector that writes `state_versions`. */
  versions: string;
  /** The projector that writes `resources`. */
  lifecycles: string;
  /**
   * Resolves once `resources` includes the event at `position`; rejects
   * when it cannot within its bound (a halted projection).
   */
  reach(position: LogPosition): Promise<void>;
}

/**
 * Resolves once `resources` includes the commit of every version
 * `state_versions` listed before the call. A listed version's row was
 * written with the versions' checkpoint at or past its commit (a batch and
 * its checkpoint commit together), so lifecycles at that checkpoint hold
 * its instances; they are usually there already (one statement), else this
 * waits for them. Row counts cannot tell: a commit that only changed
 * instances keeps the count, and the older lifecycles would be served as
 * the new version.
 */
export async function lifecyclesOfListedVersions(
  db: Database,
  projections: VersionProjections,
): Promise<void> {
  const [row] = await db.prepared<{ projected: boolean; tx: string | null; gp: string | null }>(
    `SELECT coalesce((l.transaction_id, l.global_position) >= (v.transaction_id, v.global_position),
                     false) AS projected,
            v.transaction_id::text AS tx, v.global_position AS gp
       FROM kl_checkpoints v LEFT JOIN kl_checkpoints l ON l.projection = $2
      WHERE v.projection = $1`,
    [projections.versions, projections.lifecycles],
  );
  // No checkpoint of the versions' projector: it has listed no version.
  if (row === undefined || row.projected || row.tx === null || row.gp === null) return;
  await projections.reach({ transactionId: BigInt(row.tx), globalPosition: BigInt(row.gp) });
}
