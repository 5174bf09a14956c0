import { DomainEvent } from '../shared/event';

/** Event type names are part of the public log format: written literally, never derived. */
export const RefreshEventType = {
  RefreshStarted: 'RefreshStarted',
  ResourceRefreshed: 'ResourceRefreshed',
  RefreshFinished: 'RefreshFinished',
} as const;

export const REFRESH_EVENT_TYPES: readonly string[] = Object.values(RefreshEventType);

/**
 * `normalized`: the provider returned the same object in another spelling
 * (see `driftPaths`), stored but not drift. `skipped`: a built-in resource
 * (terraform_data) that no provider plugin reads.
 */
export type RefreshOutcome = 'unchanged' | 'normalized' | 'drifted' | 'gone' | 'failed' | 'skipped';
export const REFRESH_OUTCOMES: readonly RefreshOutcome[] = [
  'unchanged',
  'normalized',
  'drifted',
  'gone',
  'failed',
  'skipped',
];

export type RefreshRunStatus = 'succeeded' | 'failed' | 'cancelled';
export const REFRESH_RUN_STATUSES: readonly RefreshRunStatus[] = [
  'succeeded',
  'failed',
  'cancelled',
];

/** What one provider read found for one instance. */
export interface RefreshResult {
  address: string;
  /** The instance's provider as the state writes it: `provider["…"].alias`. */
  provider: string;
  outcome: RefreshOutcome;
  beforeHash: string;
  /** null when the object is gone or could not be read. */
  afterHash: string | null;
  changedPaths: string[];
  error?: string;
}

export type RefreshStarted = DomainEvent<
  'RefreshStarted',
  {
    runId: string;
    stateId: string;
    stateName: string;
    fromVersion: number;
    fromSerial: number;
    dryRun: boolean;
  }
>;

export type ResourceRefreshed = DomainEvent<
  'ResourceRefreshed',
  RefreshResult & { runId: string; stateId: string }
>;

export type RefreshFinished = DomainEvent<
  'RefreshFinished',
  {
    runId: string;
    stateId: string;
    status: RefreshRunStatus;
    checked: number;
    changed: number;
    failed: number;
    /** Absent in events written before these outcomes existed (read as 0). */
    normalized?: number;
    skipped?: number;
    /** The version the refresh committed; null when it committed nothing. */
    toVersion: number | null;
    toSerial: number | null;
    errorSummary: string | null;
  }
>;

export type RefreshEvent = RefreshStarted | ResourceRefreshed | RefreshFinished;

export function isRefreshEvent(event: DomainEvent): event is RefreshEvent {
  return REFRESH_EVENT_TYPES.includes(event.type);
}
