/**
 * The JSON kld's read routes answer (docs/api.md), as plain types: the server
 * builds them, and `kl` and the web dashboard (which cannot import anything
 * outside the domain) read them.
 */
import type { JsonObject } from '../terraform/json-value';

/** A live `resource_reservations` row as the REST API returns it. */
export interface ReservationRow {
  id: string;
  state: string;
  kind: 'apply' | 'terraform-lock' | 'terraform-plan';
  run_id: string | null;
  glob: string;
  mode: 'read' | 'write';
  actor: string;
  /** The terraform lock's LockInfo; null for an apply run's (its info is in `runs`, once). */
  info: JsonObject | null;
  acquired_at: string;
  /** null for terraform locks: they last until unlocked. */
  expires_at: string | null;
}

/** The reservations held now, and the info of each apply run holding some of them. */
export interface HeldReservations {
  reservations: ReservationRow[];
  runs: { run_id: string; state: string; info: JsonObject }[];
}

/** The fields of an apply run that a listing and the run's own route share. */
interface ApplyRunFields {
  run_id: string;
  state: string;
  actor: string;
  status: string;
  lane: string;
  base_version: number;
  started_at: string;
  finished_at: string | null;
  finished_by: string | null;
  counters: { add: number; change: number; destroy: number } | null;
  committed_version: number | null;
  committed_serial: number | null;
  error_summary: string | null;
  /** Where the state document terraform left is served, when the run kept one. */
  output_state: string | null;
}

/** An `apply_runs` row, whole, as a run's own route answers it. */
export interface ApplyRun extends ApplyRunFields {
  write_set: string[];
  read_set: string[];
  reservations: { id: string; glob: string; mode: string }[];
  info: JsonObject;
}

/** How many globs of each mode a listed run names (the rest are counted). */
export const LISTED_GLOBS = 3;

/** The globs a run reserved in one mode: how many, and the first LISTED_GLOBS as granted. */
export interface GlobCount {
  count: number;
  first: string[];
}

/**
 * An apply run as a listing gives it: its sets and info are left to the run's
 * own route (a run of 5,000 addresses is about 700 KB whole), and its error
 * summary is its first line, cut.
 */
export interface ApplyRunSummary extends ApplyRunFields {
  write: GlobCount;
  read: GlobCount;
}

/** A `refresh_runs` row as the REST API returns it. */
export interface RefreshRunSummary {
  run_id: string;
  state_id: string;
  state_name: string;
  from_version: number;
  from_serial: number;
  to_version: number | null;
  to_serial: number | null;
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
