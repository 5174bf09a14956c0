import type { LockInfo } from '../../domain/state';
import type { Database } from '../postgres/database';
import type { StateHistory } from '../../domain/wire/states';

export interface StateSummary {
  stateId: string;
  name: string;
  createdAt: string;
  updatedAt: string;
  version: number;
  serial: number | null;
  lineage: string | null;
  terraformVersion: string | null;
  instanceCount: number;
  resourceCount: number;
  lock: { id: string; who: string | null; operation: string | null; since: string } | null;
  /** The current version is over its quota: which limit, and the count (quota_overruns). */
  quotaOverrun: { level: string; limit: number; count: number } | null;
}

/** The catalog of states: which exist, their locks and their versions' history rows. */
export class StateCatalogReadModel {
  constructor(private readonly db: Database) {}

  /** The live state called `name` and its current version (0 before the first write); null if none. */
  async live(name: string): Promise<{ stateId: string; version: number } | null> {
    const rows = await this.db.query<{ state_id: string; current_version: number }>(
      'SELECT state_id, current_version FROM states WHERE name = $1 AND deleted_at IS NULL',
      [name],
    );
    return rows.length ? { stateId: rows[0].state_id, version: rows[0].current_version } : null;
  }

  /** The LockInfo exactly as the holder sent it (a writer's before plans'); null when unlocked or missing. */
  async lock(name: string): Promise<LockInfo | null> {
    const rows = await this.db.query<{ info: LockInfo }>(
      `SELECT l.info FROM state_locks l
         JOIN states s ON s.state_id = l.state_id AND s.deleted_at IS NULL
        WHERE s.name = $1
        ORDER BY l.mode = 'write' DESC, l.acquired_at, l.lock_id
        LIMIT 1`,
      [name],
    );
    return rows.length ? rows[0].info : null;
  }

  /**
   * Every live state that has a version, or is locked now. A name that was
   * only locked and unlocked (a probe) was never written: terraform's GET
   * answers 404 for it, so it is not listed either.
   */
  /** `readable`: LIKE patterns of the names to list (null: every state). */
  async listStates(readable: string[] | null = null): Promise<StateSummary[]> {
    const rows = await this.db.query<{
      state_id: string;
      name: string;
      created_at: Date;
      updated_at: Date;
      current_version: number;
      current_serial: string | null;
      lineage: string | null;
      terraform_version: string | null;
      instance_count: number;
      resource_count: number;
      lock_id: string | null;
      who: string | null;
      operation: string | null;
      acquired_at: Date | null;
      q_level: string | null;
      q_limit: number | null;
      q_count: number | null;
    }>(
      `SELECT s.state_id, s.name, s.created_at, s.updated_at, s.current_version,
              s.current_serial, s.lineage, s.terraform_version, s.instance_count,
              s.resource_count, l.lock_id, l.who, l.operation, l.acquired_at,
              q.level AS q_level, q.quota_limit AS q_limit, q.resource_count AS q_count
         FROM states s
         LEFT JOIN quota_overruns q
           ON q.state_id = s.state_id AND q.version = s.current_version
         -- plans share a state: one lock is shown, a writer's first
         LEFT JOIN LATERAL (SELECT lock_id, who, operation, acquired_at FROM state_locks sl
                             WHERE sl.state_id = s.state_id
                             ORDER BY sl.mode = 'write' DESC, sl.acquired_at, sl.lock_id
                             LIMIT 1) l ON true
        WHERE s.deleted_at IS NULL AND (s.current_version > 0 OR l.lock_id IS NOT NULL)
          AND ($1::text[] IS NULL OR s.name LIKE ANY ($1::text[]))
        ORDER BY s.name`,
      [readable],
    );
    return rows.map((r) => ({
      stateId: r.state_id,
      name: r.name,
      createdAt: r.created_at.toISOString(),
      updatedAt: r.updated_at.toISOString(),
      version: r.current_version,
      serial: r.current_serial === null ? null : Number(r.current_serial),
      lineage: r.lineage,
      terraformVersion: r.terraform_version,
      instanceCount: r.instance_count,
      resourceCount: r.resource_count,
      lock:
        r.lock_id === null || r.acquired_at === null
          ? null
          : {
              id: r.lock_id,
              who: r.who,
              operation: r.operation,
              since: r.acquired_at.toISOString(),
            },
      quotaOverrun:
        r.q_level === null
          ? null
          : { level: r.q_level, limit: r.q_limit as number, count: r.q_count as number },
    }));
  }

  /**
   * Every version of the state called `name`, oldest first: the live one, or
   * when there is none the one deleted last. Null when the name was never used.
   */
  async history(name: string): Promise<StateHistory | null> {
    const states = await this.db.query<{ state_id: string; deleted_at: Date | null }>(
      `SELECT state_id, deleted_at FROM states WHERE name = $1
        ORDER BY deleted_at IS NULL DESC, deleted_at DESC LIMIT 1`,
      [name],
    );
    if (states.length === 0) return null;
    const { state_id: stateId, deleted_at: deletedAt } = states[0];
    const rows = await this.db.query<{
      version: number;
      serial: string;
      lineage: string;
      lineage_changed_from: string | null;
      source: string;
      actor: string;
      terraform_version: string;
      instance_count: number;
      resource_count: number;
      checksum: string;
      created_at: Date;
    }>(
      `SELECT version, serial, lineage, lineage_changed_from, source, actor, terraform_version,
              instance_count, resource_count, checksum, created_at
         FROM state_versions WHERE state_id = $1 ORDER BY version`,
      [stateId],
    );
    return {
      stateId,
      deletedAt: deletedAt?.toISOString() ?? null,
      versions: rows.map((r) => ({
        version: r.version,
        serial: Number(r.serial),
        lineage: r.lineage,
        lineageChangedFrom: r.lineage_changed_from,
        source: r.source,
        actor: r.actor,
        terraformVersion: r.terraform_version,
        instanceCount: r.instance_count,
        resourceCount: r.resource_count,
        checksum: r.checksum,
        createdAt: r.created_at.toISOString(),
      })),
    };
  }
}
