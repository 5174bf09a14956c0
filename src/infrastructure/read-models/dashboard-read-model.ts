import { DomainError } from '../../domain/shared/domain-error';
import type { JsonValue } from '../../domain/terraform';
import type { Database } from '../postgres/database';
import { jsonbText } from '../postgres/jsonb-text';
import { globToLike } from './resource-read-model';
import type {
  DashboardState,
  DriftRow,
  Facet,
  Facets,
  Neighbours,
  ResourcePage,
  StatePage,
  StateSort,
  VersionChanges,
} from '../../domain/wire/dashboard';

export interface ResourceFilter {
  type?: string;
  module?: string;
  provider?: string;
  addressGlob?: string;
}

const MAX_DEPENDENTS = 200;

/** The Resources page's filters, as $2…$5 after the state id (filterParams). */
const FILTERS = `($2::text IS NULL OR type = $2) AND ($3::text IS NULL OR module_path = $3)
  AND ($4::text IS NULL OR provider = $4) AND ($5::text IS NULL OR address LIKE $5 ESCAPE '\\')`;

function filterParams(stateId: string, filter: ResourceFilter): (string | null)[] {
  return [
    stateId,
    filter.type ?? null,
    filter.module ?? null,
    filter.provider ?? null,
    filter.addressGlob ? globToLike(filter.addressGlob) : null,
  ];
}
const MAX_DRIFT_ROWS = 5000;

/** What the States page lists: live states written at least once or locked now, readable ($1). */
const LISTED = `s.deleted_at IS NULL
  AND (s.current_version > 0 OR EXISTS (SELECT 1 FROM state_locks k WHERE k.state_id = s.state_id))
  AND ($1::text[] IS NULL OR s.name LIKE ANY ($1::text[]))`;

/** A listed state's lock, drift count and apply runs, for `s` (a states row or a page of them). */
const STATE_JOINS = `LEFT JOIN state_versions v ON v.state_id = s.state_id AND v.version = s.current_version
   -- The oldest holder when several share a state (plans lock it together).
   LEFT JOIN LATERAL (SELECT lock_id, who, operation, acquired_at, acquired_by
                        FROM state_locks WHERE state_id = s.state_id
                       ORDER BY acquired_at, lock_id LIMIT 1) l ON true
   LEFT JOIN LATERAL (SELECT count(*)::int AS drift_count
                        FROM current_resource_drift WHERE state_id = s.state_id) d ON true
   LEFT JOIN LATERAL (SELECT count(DISTINCT run_id)::int AS run_count,
                             array_agg(DISTINCT holder ORDER BY holder) AS run_holders
                        FROM resource_reservations
                       WHERE state_id = s.state_id AND kind = 'apply'
                         AND (expires_at IS NULL OR expires_at > now())) a ON true`;

const STATE_COLUMNS = `s.name, s.current_version, s.current_serial, s.terraform_version, s.instance_count,
        s.resource_count, s.updated_at, v.actor, v.source, v.created_at AS written_at,
        l.lock_id, l.who, l.operation, l.acquired_at, l.acquired_by, d.drift_count,
        a.run_count, a.run_holders`;

/** The States page's rows, for `WHERE ${LISTED}` and more conditions after it. */
const STATE_ROWS = `SELECT ${STATE_COLUMNS}
   FROM states s
   ${STATE_JOINS}
  WHERE ${LISTED}`;

/**
 * Each `sort=` as SQL over STATE_ROWS (never the caller's text). Nulls come
 * first ascending: a state never written sorts as the oldest write.
 */
const SORT_SQL: Record<StateSort, string> = {
  name: 's.name',
  version: 's.current_version',
  serial: 'coalesce(s.current_serial, -1)',
  instances: 's.instance_count',
  written: 'v.created_at',
  // Locked before held by apply runs before free, as the page's badges say.
  lock: `(CASE WHEN l.lock_id IS NULL THEN 0 ELSE 2 END
          + CASE WHEN coalesce(a.run_count, 0) > 0 THEN 1 ELSE 0 END)`,
  drift: 'coalesce(d.drift_count, 0)',
};

/** The sorts that need only a state's own row (and its current version's): a page is taken first. */
const OWN_ROW_SORTS: ReadonlySet<StateSort> = new Set([
  'name',
  'version',
  'serial',
  'instances',
  'written',
]);

export interface StatePageQuery {
  /** A name glob: `*` any run of characters, `?` one. */
  glob?: string;
  sort?: StateSort;
  desc?: boolean;
  offset?: number;
  /** Rows at most; every matching state without one. */
  limit?: number;
}

interface StateRow {
  name: string;
  current_version: number;
  current_serial: string | null;
  terraform_version: string | null;
  instance_count: number;
  resource_count: number;
  updated_at: Date;
  actor: string | null;
  source: string | null;
  written_at: Date | null;
  lock_id: string | null;
  who: string | null;
  operation: string | null;
  acquired_at: Date | null;
  acquired_by: string | null;
  drift_count: number | null;
  run_count: number | null;
  run_holders: string[] | null;
}

function stateRow(r: StateRow): DashboardState {
  return {
    name: r.name,
    version: r.current_version,
    serial: r.current_serial === null ? null : Number(r.current_serial),
    terraformVersion: r.terraform_version,
    instanceCount: r.instance_count,
    resourceCount: r.resource_count,
    updatedAt: r.updated_at.toISOString(),
    lastWrite:
      r.actor === null || r.source === null || r.written_at === null
        ? null
        : { actor: r.actor, source: r.source, at: r.written_at.toISOString() },
    lock:
      r.lock_id === null || r.acquired_at === null
        ? null
        : {
            id: r.lock_id,
            who: r.who,
            operation: r.operation,
            since: r.acquired_at.toISOString(),
            by: r.acquired_by ?? '',
          },
    applyRuns: { count: r.run_count ?? 0, holders: r.run_holders ?? [] },
    driftCount: r.drift_count ?? 0,
  };
}

/**
 * The aggregates the web dashboard shows that no `kl` route answers in one
 * request: per-state drift counts and last writers, per-version change
 * counts, filtered pages of a large state's resources, dependency edges.
 */
export class DashboardReadModel {
  constructor(private readonly db: Database) {}

  /**
   * The listed states (`readable`: LIKE patterns of the names to list, null:
   * every state) whose name matches `glob`, sorted, one page of them (every
   * one without a `limit`), with how many match and how many are listed.
   */
  async states(readable: string[] | null = null, page: StatePageQuery = {}): Promise<StatePage> {
    const like = page.glob ? globToLike(page.glob) : null;
    const order = `${SORT_SQL[page.sort ?? 'name']} ${page.desc ? 'DESC NULLS LAST' : 'ASC NULLS FIRST'}`;
    const offset = page.offset ?? 0;
    const sort = page.sort ?? 'name';
    const glob = `($2::text IS NULL OR s.name LIKE $2 ESCAPE '\\')`;
    // The counts apart from the page: a window count would build every listed row's
    // lock, drift and runs first, where the page alone stops after `limit` rows.
    // A sort by a state's own columns takes the page first and builds lock, drift
    // and runs for its rows only; by lock or drift every listed row needs them.
    const rowsSql = OWN_ROW_SORTS.has(sort)
      ? `WITH page AS MATERIALIZED (
           SELECT s.*, row_number() OVER (ORDER BY ${order}, s.name) AS ord
             FROM states s
             LEFT JOIN state_versions v ON v.state_id = s.state_id AND v.version = s.current_version
            WHERE ${LISTED} AND ${glob}
            ORDER BY ord LIMIT $3 OFFSET $4)
         SELECT ${STATE_COLUMNS}
           FROM page s
           ${STATE_JOINS}
          ORDER BY s.ord`
      : `${STATE_ROWS} AND ${glob} ORDER BY ${order}, s.name LIMIT $3 OFFSET $4`;
    const [rows, counts] = await Promise.all([
      this.db.query<StateRow>(rowsSql, [readable, like, page.limit ?? null, offset]),
      this.db.query<{ unfiltered: number; total: number }>(
        `SELECT count(*)::int AS unfiltered,
                count(*) FILTER (WHERE $2::text IS NULL OR s.name LIKE $2 ESCAPE '\\')::int AS total
           FROM states s
          WHERE ${LISTED}`,
        [readable, like],
      ),
    ]);
    return {
      states: rows.map(stateRow),
      total: counts[0].total,
      unfiltered: counts[0].unfiltered,
      offset,
    };
  }

  /**
   * Per version, the addresses whose lifecycle only opened (added), opened
   * and closed (changed) or only closed (removed) in that version.
   */
  async changes(state: string): Promise<VersionChanges[]> {
    const stateId = await this.stateId(state);
    const rows = await this.db.query<VersionChanges>(
      `WITH opened AS (SELECT create_version AS v, address FROM resources WHERE state_id = $1),
            closed AS (SELECT delete_version AS v, address FROM resources
                        WHERE state_id = $1 AND delete_version IS NOT NULL)
       SELECT coalesce(o.v, c.v) AS version,
              count(*) FILTER (WHERE c.v IS NULL)::int AS added,
              count(*) FILTER (WHERE o.v IS NOT NULL AND c.v IS NOT NULL)::int AS changed,
              count(*) FILTER (WHERE o.v IS NULL)::int AS removed
         FROM opened o FULL JOIN closed c ON c.v = o.v AND c.address = o.address
        GROUP BY 1 ORDER BY 1`,
      [stateId],
    );
    return rows;
  }

  /** One page of the state's live instances matching `filter`, with the facets unless `facets` is false. */
  async resources(
    state: string,
    filter: ResourceFilter,
    offset: number,
    limit: number,
    facets = true,
  ): Promise<ResourcePage> {
    const stateId = await this.stateId(state);
    // The page and the count apart: a window count would read and sort every row first,
    // where the page alone walks the live-address index and stops after `limit`.
    const [rows, total, facetsOf] = await Promise.all([
      this.db.query<{
        address: string;
        resource_address: string;
        mode: string;
        type: string;
        module_path: string;
        provider: string;
        status: string | null;
        create_version: number;
      }>(
        `SELECT address, resource_address, mode, type, module_path, provider, status, create_version
           FROM resources
          WHERE state_id = $1 AND delete_version IS NULL AND ${FILTERS}
          ORDER BY address LIMIT $6 OFFSET $7`,
        [...filterParams(stateId, filter), limit, offset],
      ),
      this.count(stateId, filter),
      facets ? this.facetsOf(stateId) : undefined,
    ]);
    return {
      total,
      offset,
      rows: rows.map((r) => ({
        address: r.address,
        resourceAddress: r.resource_address,
        mode: r.mode,
        type: r.type,
        module: r.module_path,
        provider: r.provider,
        status: r.status,
        sinceVersion: r.create_version,
      })),
      ...(facetsOf && { facets: facetsOf }),
    };
  }

  /** Every value the Resources page's filters can take in the state now, with instance counts. */
  async facets(state: string): Promise<Facets> {
    return this.facetsOf(await this.stateId(state));
  }

  private async facetsOf(stateId: string): Promise<Facets> {
    const combos = await this.db.query<{
      type: string;
      module_path: string;
      provider: string;
      n: number;
    }>(
      `SELECT type, module_path, provider, count(*)::int AS n FROM resources
        WHERE state_id = $1 AND delete_version IS NULL GROUP BY 1, 2, 3`,
      [stateId],
    );
    const facet = (key: 'type' | 'module_path' | 'provider'): Facet[] => {
      const counts = new Map<string, number>();
      for (const c of combos) counts.set(c[key], (counts.get(c[key]) ?? 0) + c.n);
      return [...counts]
        .map(([value, count]) => ({ value, count }))
        .sort((a, b) => (a.value < b.value ? -1 : a.value > b.value ? 1 : 0));
    };
    return { types: facet('type'), modules: facet('module_path'), providers: facet('provider') };
  }

  async neighbours(state: string, address: string): Promise<Neighbours> {
    const stateId = await this.stateId(state);
    const self = await this.db.query<{ resource_address: string; dependencies: JsonValue }>(
      `SELECT resource_address, dependencies FROM resources
        WHERE state_id = $1 AND address = $2 AND delete_version IS NULL`,
      [stateId, address],
    );
    if (self.length === 0) {
      throw new DomainError('RESOURCE.NOT_FOUND', `state "${state}" has no resource ${address}`);
    }
    const { resource_address: resourceAddress, dependencies } = self[0];
    const targets = Array.isArray(dependencies)
      ? [...new Set(dependencies.filter((d): d is string => typeof d === 'string'))].sort()
      : [];
    const alive = await this.db.query<{ resource_address: string; n: number }>(
      `SELECT resource_address, count(*)::int AS n FROM resources
        WHERE state_id = $1 AND delete_version IS NULL AND resource_address = ANY($2::text[])
        GROUP BY 1`,
      [stateId, targets],
    );
    const counts = new Map(alive.map((a) => [a.resource_address, a.n]));
    // The resource edges say which resources depend on this one, and how
    // many of their live instances do (one row per dependent resource: a
    // resource that 50,000 instances depend on was a 50,000-row count on
    // every view). The page names the first dependent instances by address:
    // of each dependent resource, its first live instances that declare this
    // one, read in address order from resources_live_by_resource (migration
    // 035), then merged. The instance edges (the view resource_dependencies)
    // have no index by target. Each resource is a branch of its own, with
    // its address as a value, so a 50,000-instance resource and a
    // one-instance resource are each planned as what they are; and it is
    // matched by a range (>= and <=, which is = for a deterministic
    // collation) ordered by (resource_address, address), an order only that
    // index gives: with `=` the order is plain `address`, which the
    // state-wide address indexes give too, and PostgreSQL took them for a
    // big resource, reading every instance sorted before it.
    const edges = await this.db.query<{ from_resource_address: string; instances: number }>(
      `SELECT from_resource_address, instances FROM resource_edges
        WHERE state_id = $1 AND to_address = $2 ORDER BY from_resource_address`,
      [stateId, resourceAddress],
    );
    const firstOfEach = edges.map(
      (_, i) =>
        `(SELECT resource_address, address FROM resources
           WHERE state_id = $1 AND resource_address >= $${i + 3} AND resource_address <= $${i + 3}
             AND delete_version IS NULL AND dependencies @> $2::jsonb
           ORDER BY resource_address, address LIMIT ${MAX_DEPENDENTS})`,
    );
    const dependents = edges.length
      ? await this.db.query<{ address: string }>(
          `SELECT address FROM (${firstOfEach.join(' UNION ALL ')}) d
            ORDER BY address LIMIT ${MAX_DEPENDENTS}`,
          [stateId, jsonbText([resourceAddress]), ...edges.map((e) => e.from_resource_address)],
        )
      : [];
    return {
      resourceAddress,
      dependsOn: targets.map((t) => ({ resourceAddress: t, instances: counts.get(t) ?? 0 })),
      dependents: dependents.map((d) => d.address),
      dependentsTotal: edges.reduce((n, e) => n + e.instances, 0),
    };
  }

  /**
   * `current_resource_drift` of every live state (`readable`: LIKE patterns
   * of the names to list, null: every state), with the module of each instance.
   */
  async drift(readable: string[] | null = null): Promise<{ rows: DriftRow[]; truncated: boolean }> {
    const rows = await this.db.query<{
      state_name: string;
      address: string;
      type: string;
      module_path: string | null;
      changed_paths: JsonValue;
      previous_attributes: JsonValue;
      current_attributes: JsonValue;
      sensitive_attributes: JsonValue;
      detected_version: number;
      refresh_run_id: string | null;
    }>(
      `SELECT d.state_name, d.address, d.type, r.module_path, d.changed_paths,
              d.previous_attributes, d.current_attributes, r.sensitive_attributes,
              d.detected_version, d.refresh_run_id
         FROM current_resource_drift d
         LEFT JOIN resources r
           ON r.state_id = d.state_id AND r.address = d.address AND r.delete_version IS NULL
        WHERE $1::text[] IS NULL OR d.state_name LIKE ANY ($1::text[])
        ORDER BY d.state_name, d.type, r.module_path, d.address
        LIMIT ${MAX_DRIFT_ROWS + 1}`,
      [readable],
    );
    return {
      truncated: rows.length > MAX_DRIFT_ROWS,
      rows: rows.slice(0, MAX_DRIFT_ROWS).map((r) => ({
        state: r.state_name,
        address: r.address,
        type: r.type,
        module: r.module_path ?? '',
        changedPaths: r.changed_paths,
        previousAttributes: r.previous_attributes,
        currentAttributes: r.current_attributes,
        sensitiveAttributes: r.sensitive_attributes,
        detectedVersion: r.detected_version,
        refreshRunId: r.refresh_run_id,
      })),
    };
  }

  private async count(stateId: string, filter: ResourceFilter): Promise<number> {
    const rows = await this.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM resources
        WHERE state_id = $1 AND delete_version IS NULL AND ${FILTERS}`,
      filterParams(stateId, filter),
    );
    return rows[0].n;
  }

  private async stateId(name: string): Promise<string> {
    const rows = await this.db.query<{ state_id: string }>(
      'SELECT state_id FROM states WHERE name = $1 AND deleted_at IS NULL',
      [name],
    );
    if (rows.length === 0) throw new DomainError('STATE.NOT_FOUND', `no state named "${name}"`);
    return rows[0].state_id;
  }
}
