/**
 * The JSON kld's read routes answer (docs/api.md), as plain types: the server
 * builds them, and `kl` and the web dashboard (which cannot import anything
 * outside the domain) read them.
 */
import type { JsonValue } from '../terraform/json-value';

/** One row of the dashboard's States page. */
export interface DashboardState {
  name: string;
  version: number;
  serial: number | null;
  terraformVersion: string | null;
  instanceCount: number;
  resourceCount: number;
  updatedAt: string;
  /** Who wrote the current version, how and when; null before the first write. */
  lastWrite: { actor: string; source: string; at: string } | null;
  lock: {
    id: string;
    who: string | null;
    operation: string | null;
    since: string;
    by: string;
  } | null;
  /** `kl apply` runs holding reservations on the state, and who started them. */
  applyRuns: { count: number; holders: string[] };
  driftCount: number;
}

/** The columns `GET /v1/dashboard/states` sorts by (`sort=`); ties go by name. */
export const STATE_SORTS = [
  'name',
  'version',
  'serial',
  'instances',
  'written',
  'lock',
  'drift',
] as const;
export type StateSort = (typeof STATE_SORTS)[number];

/** `GET /v1/dashboard/states`: one page (or all) of the listed states matching the glob. */
export interface StatePage {
  states: DashboardState[];
  /** States matching the glob. */
  total: number;
  /** States listed (readable), whatever the glob. */
  unfiltered: number;
  offset: number;
}

/** Instances added, changed and removed by one version. */
export interface VersionChanges {
  version: number;
  added: number;
  changed: number;
  removed: number;
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
  /**
   * Every value the filters can take in the current state, with instance
   * counts; absent when asked without (`facets=false`).
   */
  facets?: Facets;
}

export interface Facets {
  types: Facet[];
  modules: Facet[];
  providers: Facet[];
}

export interface Facet {
  value: string;
  count: number;
}

/** What an instance depends on (resource addresses) and which instances depend on its resource. */
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
  changedPaths: JsonValue;
  previousAttributes: JsonValue;
  currentAttributes: JsonValue;
  /** The current lifecycle's `sensitive_attributes`, so the page can mask. */
  sensitiveAttributes: JsonValue;
  detectedVersion: number;
  refreshRunId: string | null;
}
