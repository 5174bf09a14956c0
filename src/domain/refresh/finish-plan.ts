import { RefreshRunStatus } from './refresh-run.events';
import { countsOf, RunFacts } from './refresh-run.model';

export interface FinishPlan {
  /** Commit the run's document before recording the finish. */
  commit: boolean;
  status: RefreshRunStatus;
  errorSummary: string | null;
}

/**
 * What finishing a run does. Only a succeeded, non-dry run with zero failed
 * instances commits (ADR 0006: never a partial refresh). A run that reports
 * success while some instances failed is recorded as failed: refresh_runs
 * must not call a run that changed nothing a success.
 */
export function planFinish(
  run: RunFacts,
  request: { status: RefreshRunStatus; errorSummary: string | null; hasDocument: boolean },
): FinishPlan {
  const { status, errorSummary, hasDocument } = request;
  if (status !== 'succeeded') return { commit: false, status, errorSummary };
  const { checked, failed } = countsOf(run);
  if (failed > 0) {
    return {
      commit: false,
      status: 'failed',
      errorSummary:
        errorSummary ?? `${failed} of ${checked} instances failed to refresh; nothing committed`,
    };
  }
  return { commit: hasDocument && !run.dryRun, status, errorSummary };
}
