import { RefreshOutcome, RefreshRunStatus } from './refresh-run.events';

/** What one address last reported in a run: enough to count and to spot a repeated batch. */
export interface RecordedOutcome {
  outcome: RefreshOutcome;
  beforeHash: string;
  afterHash: string | null;
}

export type RefreshRun = MissingRun | RunningRun | FinishedRun;

export interface MissingRun {
  status: 'missing';
}

export interface RunFacts {
  runId: string;
  stateId: string;
  stateName: string;
  fromVersion: number;
  fromSerial: number;
  dryRun: boolean;
  /** address → its latest result; size = instances checked. */
  results: Map<string, RecordedOutcome>;
  changed: number;
  failed: number;
}

export interface RunningRun extends RunFacts {
  status: 'running';
}

export interface FinishedRun extends RunFacts {
  status: 'finished';
  outcome: RefreshRunStatus;
  toVersion: number | null;
}

export function initialRefreshRun(): RefreshRun {
  return { status: 'missing' };
}

/** drifted and gone both mean the provider disagrees with the recorded state. */
export function isChange(outcome: RefreshOutcome): boolean {
  return outcome === 'drifted' || outcome === 'gone';
}

export interface RunCounts {
  checked: number;
  changed: number;
  failed: number;
}

export function countsOf(run: RunFacts): RunCounts {
  return { checked: run.results.size, changed: run.changed, failed: run.failed };
}
