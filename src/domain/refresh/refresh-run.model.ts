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
  normalized: number;
  skipped: number;
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
  /** Instances read through their provider: every result but the skipped ones. */
  checked: number;
  changed: number;
  failed: number;
  normalized: number;
  skipped: number;
}

export function countsOf(run: RunFacts): RunCounts {
  return {
    checked: run.results.size - run.skipped,
    changed: run.changed,
    failed: run.failed,
    normalized: run.normalized,
    skipped: run.skipped,
  };
}

/** How much one outcome adds to each running counter. */
export function tally(
  outcome: RefreshOutcome,
): Pick<RunFacts, 'changed' | 'failed' | 'normalized' | 'skipped'> {
  return {
    changed: isChange(outcome) ? 1 : 0,
    failed: outcome === 'failed' ? 1 : 0,
    normalized: outcome === 'normalized' ? 1 : 0,
    skipped: outcome === 'skipped' ? 1 : 0,
  };
}
