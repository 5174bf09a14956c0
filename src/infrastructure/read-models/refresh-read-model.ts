import type {
  CurrentStateVersion,
  RefreshStateLookup,
} from '../../application/refresh/refresh-read.port';
import type { JsonObject, JsonValue } from '../../domain/terraform';
import type { Database } from '../postgres/database';
import type { RefreshRunSummary } from '../../domain/wire/runs';

export interface DriftEntry {
  address: string;
  type: string;
  changed_paths: string[];
  previous_attributes: JsonValue;
  current_attributes: JsonValue;
  detected_serial: number;
  detected_version: number;
  refresh_run_id: string | null;
}

export interface StoredProviderConfig {
  source: string;
  alias: string | null;
  config: JsonObject;
  updated_at: string;
  updated_by: string;
}

type RunRow = Omit<
  RefreshRunSummary,
  'from_serial' | 'to_serial' | 'started_at' | 'finished_at'
> & {
  from_serial: string;
  to_serial: string | null;
  started_at: Date;
  finished_at: Date | null;
};

const RUN_COLUMNS = `run_id, state_id, state_name, from_version, from_serial, to_version,
  to_serial, checked, changed, failed, normalized, skipped, status, error_summary, actor, dry_run,
  started_at, finished_at`;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function runOf(r: RunRow): RefreshRunSummary {
  return {
    ...r,
    from_serial: Number(r.from_serial),
    to_serial: r.to_serial === null ? null : Number(r.to_serial),
    started_at: r.started_at.toISOString(),
    finished_at: r.finished_at === null ? null : r.finished_at.toISOString(),
  };
}

function configOf(r: {
  source: string;
  alias: string;
  config: JsonObject;
  updated_at: Date;
  updated_by: string;
}): StoredProviderConfig {
  return {
    source: r.source,
    alias: r.alias === '' ? null : r.alias,
    config: r.config,
    updated_at: r.updated_at.toISOString(),
    updated_by: r.updated_by,
  };
}

/** The queries behind the refresh, drift and provider-config endpoints. */
export class RefreshReadModel implements RefreshStateLookup {
  constructor(private readonly db: Database) {}

  async currentVersion(name: string): Promise<CurrentStateVersion | null> {
    const rows = await this.db.query<{ state_id: string; version: number; serial: string }>(
      `SELECT state_id, current_version AS version, current_serial AS serial FROM states
        WHERE name = $1 AND deleted_at IS NULL AND current_version > 0`,
      [name],
    );
    if (rows.length === 0) return null;
    return { stateId: rows[0].state_id, version: rows[0].version, serial: Number(rows[0].serial) };
  }

  async stateExists(name: string): Promise<boolean> {
    const rows = await this.db.query(
      'SELECT 1 FROM states WHERE name = $1 AND deleted_at IS NULL',
      [name],
    );
    return rows.length > 0;
  }

  async addressesNotIn(stateId: string, version: number, addresses: string[]): Promise<string[]> {
    const rows = await this.db.query<{ address: string }>(
      `SELECT a.address FROM unnest($3::text[]) AS a(address)
        WHERE NOT EXISTS (
          SELECT 1 FROM resources r
           WHERE r.state_id = $1 AND r.address = a.address AND r.create_version <= $2
             AND (r.delete_version IS NULL OR r.delete_version > $2))`,
      [stateId, version, [...new Set(addresses)]],
    );
    return rows.map((r) => r.address);
  }

  async run(runId: string): Promise<RefreshRunSummary | null> {
    if (!UUID.test(runId)) return null;
    const rows = await this.db.query<RunRow>(
      `SELECT ${RUN_COLUMNS} FROM refresh_runs WHERE run_id = $1`,
      [runId],
    );
    return rows.length ? runOf(rows[0]) : null;
  }

  /** Newest first; every state's when `stateName` is null. */
  /** `readable`: LIKE patterns of the state names to list (null: every state). */
  async runs(
    stateName: string | null,
    limit: number,
    readable: string[] | null = null,
  ): Promise<RefreshRunSummary[]> {
    const rows = await this.db.query<RunRow>(
      `SELECT ${RUN_COLUMNS} FROM refresh_runs
        WHERE ($1::text IS NULL OR state_name = $1)
          AND ($3::text[] IS NULL OR state_name LIKE ANY ($3::text[]))
        ORDER BY started_at DESC, run_id LIMIT $2`,
      [stateName, limit, readable],
    );
    return rows.map(runOf);
  }

  /** When the state was last refreshed, successfully or not (the scheduler's pacing). */
  async lastStarted(stateName: string): Promise<Date | null> {
    const rows = await this.db.query<{ at: Date | null }>(
      'SELECT max(started_at) AS at FROM refresh_runs WHERE state_name = $1',
      [stateName],
    );
    return rows[0]?.at ?? null;
  }

  async drift(stateName: string): Promise<DriftEntry[]> {
    const rows = await this.db.query<
      Omit<DriftEntry, 'detected_serial'> & { detected_serial: string }
    >(
      `SELECT address, type, changed_paths, previous_attributes, current_attributes,
              detected_serial, detected_version, refresh_run_id
         FROM current_resource_drift WHERE state_name = $1 ORDER BY address`,
      [stateName],
    );
    return rows.map((r) => ({ ...r, detected_serial: Number(r.detected_serial) }));
  }

  async providerConfigs(stateName: string): Promise<StoredProviderConfig[]> {
    const rows = await this.db.query<Parameters<typeof configOf>[0]>(
      `SELECT source, alias, config, updated_at, updated_by FROM provider_configs
        WHERE state_name = $1 ORDER BY source, alias`,
      [stateName],
    );
    return rows.map(configOf);
  }

  async providerConfig(
    stateName: string,
    source: string,
    alias: string | null,
  ): Promise<StoredProviderConfig | null> {
    const rows = await this.db.query<Parameters<typeof configOf>[0]>(
      `SELECT source, alias, config, updated_at, updated_by FROM provider_configs
        WHERE state_name = $1 AND source = $2 AND alias = $3`,
      [stateName, source, alias ?? ''],
    );
    return rows.length ? configOf(rows[0]) : null;
  }
}
