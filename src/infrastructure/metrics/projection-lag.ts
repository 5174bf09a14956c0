import type { Database } from '../postgres/database';
import type { ProjectionLag } from './prometheus-metrics';

/**
 * Each projector's committed events past its checkpoint, and the age of
 * the oldest of them: what a reader of that projector's tables is missing.
 */
export async function projectionLag(
  db: Database,
  projectors: readonly string[],
  halted: ReadonlySet<string>,
): Promise<ProjectionLag[]> {
  const rows = await db.query<{ projector: string; events: string; seconds: number | null }>(
    `SELECT n.name AS projector,
            count(e.global_position) AS events,
            extract(epoch FROM now() - min(e.created_at))::float8 AS seconds
       FROM unnest($1::text[]) AS n(name)
       LEFT JOIN kl_checkpoints c ON c.projection = n.name
       LEFT JOIN kl_events e
              ON (e.transaction_id, e.global_position)
               > (coalesce(c.transaction_id, '0'::xid8), coalesce(c.global_position, 0))
      GROUP BY n.name`,
    [projectors],
  );
  return rows.map((r) => ({
    projector: r.projector,
    events: Number(r.events),
    seconds: Math.max(0, r.seconds ?? 0),
    halted: halted.has(r.projector),
  }));
}
