/** The JSON kld answers, as the dashboard reads it (docs/api.md). */

export interface DashboardState {
  name: string;
  version: number;
  serial: number | null;
  terraformVersion: string | null;
  instanceCount: number;
  resourceCount: number;
  updatedAt: string;
  lastWrite: { actor: string; source: string; at: string } | null;
  lock: {
    id: string;
    who: string | null;
    operation: string | null;
    since: string;
    by: string;
  } | null;
  applyRuns: { count: number; holders: string[] };
  driftCount: number;
}

export interface VersionRow {
  version: number;
  serial: number;
  lineage: string;
  lineageChangedFrom: string | null;
  source: string;
  actor: string;
  terraformVersion: string;
  instanceCount: number;
  resourceCount: number;
  checksum: string;
  createdAt: string;
}

export interface History {
  state: string;
  deletedAt: string | null;
  versions: VersionRow[];
}

export interface VersionChanges {
  version: number;
  added: number;
  changed: number;
  removed: number;
}

export interface StateDiff {
  from: { version: number; serial: number };
  to: { version: number; serial: number };
  added: string[];
  removed: string[];
  changed: { address: string; attributes: string[]; members: string[] }[];
}

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export interface ResourceDetail {
  address: string;
  resourceAddress: string;
  mode: string;
  type: string;
  name: string;
  module: string;
  indexKey: string | null;
  deposedKey: string | null;
  provider: string;
  status: string | null;
  sinceVersion: number;
  sinceSerial: number;
  schemaVersion: number;
  attributes: Json | null;
  sensitiveAttributes: Json | null;
  dependencies: Json | null;
}

export interface Lifecycle {
  createVersion: number;
  createSerial: number;
  deleteVersion: number | null;
  deleteSerial: number | null;
  attributesHash: string;
  attributes: Json | null;
}

export interface ResourcePage {
  total: number;
  offset: number;
  rows: {
    address: string;
    resourceAddress: string;
    mode: string;
    type: string;
    module: string;
    provider: string;
    status: string | null;
    sinceVersion: number;
  }[];
  facets: { types: Facet[]; modules: Facet[]; providers: Facet[] };
}

export interface Facet {
  value: string;
  count: number;
}

export interface Neighbours {
  resourceAddress: string;
  dependsOn: { resourceAddress: string; instances: number }[];
  dependents: string[];
  dependentsTotal: number;
}

export interface DriftRow {
  state: string;
  address: string;
  type: string;
  module: string;
  changedPaths: Json;
  previousAttributes: Json;
  currentAttributes: Json;
  sensitiveAttributes: Json;
  detectedVersion: number;
  refreshRunId: string | null;
}

export interface RefreshRun {
  run_id: string;
  state_name: string;
  from_version: number;
  to_version: number | null;
  checked: number;
  changed: number;
  failed: number;
  normalized: number;
  skipped: number;
  status: string;
  error_summary: string | null;
  actor: string;
  dry_run: boolean;
  started_at: string;
  finished_at: string | null;
}

export interface Lock {
  name: string;
  lockId: string;
  operation: string | null;
  who: string | null;
  acquiredAt: string;
  acquiredBy: string;
  info: Record<string, unknown>;
  /** `read` for a plan's shared lock. */
  mode?: string;
}

export interface Reservation {
  id: string;
  state: string;
  kind: 'apply' | 'terraform-lock' | 'terraform-plan';
  run_id: string | null;
  glob: string;
  mode: 'read' | 'write';
  actor: string;
  acquired_at: string;
  expires_at: string | null;
}

export interface ApplyRun {
  run_id: string;
  state: string;
  actor: string;
  status: string;
  lane: string;
  base_version: number;
  write_set: string[];
  started_at: string;
  finished_at: string | null;
  counters: { add: number; change: number; destroy: number } | null;
  committed_version: number | null;
  error_summary: string | null;
}

export interface QueryResult {
  columns: { name: string; type: string }[];
  rows: unknown[][];
  truncated: boolean;
}
