import { globToLike } from '../../domain/auth';
import {
  effectiveQuota,
  overrunOf,
  QuotaLevel,
  QuotaLimit,
  verdictOf,
  QuotaVerdict,
} from '../../domain/quota';
import type { Database } from '../postgres/database';

/** A quota rule as `kl quota rules` lists it. */
export interface QuotaRuleRow {
  glob: string;
  max_resources: number;
  soft_resources: number | null;
  set_at: string;
  set_by: string;
}

export interface QuotaOverrunRow {
  version: number;
  level: QuotaLevel;
  glob: string;
  limit: number;
  resources: number;
  at: string;
  actor: string;
}

/** One state's usage under the quota that governs it, as `kl quota` shows it. */
export interface QuotaUsage {
  state: string;
  version: number;
  /** Resources the current version holds (managed, non-deposed instances). */
  resources: number;
  quota: { glob: string; max_resources: number; soft_resources: number | null } | null;
  /** max − resources; negative when over. Null without a quota. */
  headroom: number | null;
  /** soft − resources; null without a soft limit. */
  soft_headroom: number | null;
  status: 'ok' | QuotaLevel | 'none';
  /** The newest version committed over a limit, whatever the current count. */
  last_overrun: QuotaOverrunRow | null;
}

interface StateCountRow {
  name: string;
  version: number;
  resources: number;
  o_version: number | null;
  o_level: QuotaLevel | null;
  o_glob: string | null;
  o_limit: number | null;
  o_resources: number | null;
  o_at: string | null;
  o_actor: string | null;
}

function toLimit(r: QuotaRuleRow): QuotaLimit {
  return { glob: r.glob, maxResources: r.max_resources, softResources: r.soft_resources };
}

/** `quotas` and `quota_overruns`, with the counts of the states' live resources. */
export class QuotaReadModel {
  constructor(private readonly db: Database) {}

  rules(): Promise<QuotaRuleRow[]> {
    return this.db.query<QuotaRuleRow>(
      `SELECT glob, max_resources, soft_resources, to_json(set_at)#>>'{}' AS set_at, set_by
         FROM quotas ORDER BY glob`,
    );
  }

  /**
   * Usage of one live state (with or without a quota), or of every live
   * state a quota governs; `readable`: LIKE patterns of the states the
   * caller may read (null: all).
   */
  async usage(readable: string[] | null, state?: string): Promise<QuotaUsage[]> {
    const rules = (await this.rules()).map(toLimit);
    if (state === undefined && rules.length === 0) return [];
    const governed = state === undefined ? rules.map((r) => globToLike(r.glob)) : null;
    const rows = await this.db.query<StateCountRow>(
      `SELECT s.name, s.current_version AS version,
              (SELECT count(*) FROM resources r
                WHERE r.state_id = s.state_id AND r.delete_version IS NULL
                  AND r.mode = 'managed' AND r.deposed_key IS NULL)::int AS resources,
              o.version AS o_version, o.level AS o_level, o.glob AS o_glob,
              o.quota_limit AS o_limit, o.resource_count AS o_resources,
              to_json(o.occurred_at)#>>'{}' AS o_at, o.actor AS o_actor
         FROM states s
         LEFT JOIN LATERAL (
           SELECT * FROM quota_overruns q WHERE q.state_id = s.state_id
            ORDER BY q.version DESC LIMIT 1) o ON true
        WHERE s.deleted_at IS NULL
          AND ($1::text[] IS NULL OR s.name LIKE ANY ($1))
          AND ($2::text[] IS NULL OR s.name LIKE ANY ($2))
          AND ($3::text IS NULL OR s.name = $3)
        ORDER BY s.name`,
      [readable, governed, state ?? null],
    );
    return rows.map((row) => usageOf(row, effectiveQuota(rules, row.name) ?? null));
  }

  /** Would `creates` more and `deletes` fewer resources fit the state's quota? */
  async check(
    state: string,
    creates: number,
    deletes: number,
  ): Promise<QuotaVerdict & { exists: boolean }> {
    const [usage] = await this.usage(null, state);
    const rules = (await this.rules()).map(toLimit);
    const quota = effectiveQuota(rules, state) ?? null;
    return { ...verdictOf(quota, usage?.resources ?? 0, creates - deletes), exists: !!usage };
  }
}

function usageOf(row: StateCountRow, quota: QuotaLimit | null): QuotaUsage {
  const level = quota === null ? null : overrunOf(quota, row.resources);
  return {
    state: row.name,
    version: row.version,
    resources: row.resources,
    quota:
      quota === null
        ? null
        : {
            glob: quota.glob,
            max_resources: quota.maxResources,
            soft_resources: quota.softResources,
          },
    headroom: quota === null ? null : quota.maxResources - row.resources,
    soft_headroom:
      quota === null || quota.softResources === null ? null : quota.softResources - row.resources,
    status: quota === null ? 'none' : (level ?? 'ok'),
    last_overrun:
      row.o_version === null
        ? null
        : {
            version: row.o_version,
            level: row.o_level as QuotaLevel,
            glob: row.o_glob as string,
            limit: row.o_limit as number,
            resources: row.o_resources as number,
            at: row.o_at as string,
            actor: row.o_actor as string,
          },
  };
}
