import { ApplyStarted, ApplyStatus } from './apply-run.events';

export type ApplyRun = MissingApplyRun | RunningApplyRun | FinishedApplyRun;

export interface MissingApplyRun {
  status: 'missing';
}

export interface RunningApplyRun {
  status: 'running';
  started: ApplyStarted['data'];
}

export interface FinishedApplyRun {
  status: 'finished';
  started: ApplyStarted['data'];
  outcome: ApplyStatus;
  version: number | null;
  serial: number | null;
  /** The commit's checksum; null when not committed, or finished before wave 26 recorded it. */
  checksum: string | null;
}

export function initialApplyRun(): ApplyRun {
  return { status: 'missing' };
}
