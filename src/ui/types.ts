/**
 * The JSON kld answers, under the names the dashboard's pages use. The shapes
 * are declared once, in src/domain/wire, where the server builds them.
 */
import type { JsonValue } from '../domain/terraform/json-value';
import type { StateHistory } from '../domain/wire/states';

export type {
  DashboardState,
  DriftRow,
  Facet,
  Facets,
  Neighbours,
  ResourcePage,
  StatePage,
  StateSort,
  VersionChanges,
} from '../domain/wire/dashboard';
export type { SqlQueryResult as QueryResult } from '../domain/wire/query';
export type {
  ApplyRunSummary as ApplyRun,
  RefreshRunSummary as RefreshRun,
  ReservationRow as Reservation,
} from '../domain/wire/runs';
export type {
  LockSummary as Lock,
  ResourceDetail,
  ResourceLifecycle as Lifecycle,
  StateDiff,
  StateVersionSummary as VersionRow,
} from '../domain/wire/states';

/** `GET /v1/api/states/<name>/history`: the state's name with its history. */
export type History = StateHistory & { state: string };

export type Json = JsonValue;
