import { Decider } from '../shared/decider';
import { DomainError } from '../shared/domain-error';
import {
  FinishRefresh,
  RecordRefreshResults,
  RefreshCommand,
  StartRefresh,
} from './refresh-run.commands';
import { RefreshEvent, ResourceRefreshed } from './refresh-run.events';
import {
  countsOf,
  initialRefreshRun,
  RecordedOutcome,
  RefreshRun,
  RunFacts,
  tally,
} from './refresh-run.model';
import {
  REFRESH_ALREADY_STARTED,
  REFRESH_FINISHED,
  REFRESH_INVALID,
  REFRESH_NOT_FOUND,
} from './refresh.errors';

function assertNever(value: never): never {
  throw new Error(`unexpected ${JSON.stringify(value)}`);
}

function notFound(runId: string): DomainError {
  return new DomainError(REFRESH_NOT_FOUND, `refresh run ${runId} does not exist`);
}

/** The run, if it may still take results or a finish; else why not. */
export function requireRunning(run: RefreshRun, runId: string): RunFacts & { status: 'running' } {
  if (run.status === 'missing') throw notFound(runId);
  if (run.status === 'finished') {
    throw new DomainError(
      REFRESH_FINISHED,
      `refresh run ${runId} already finished (${run.outcome})`,
      { status: run.outcome },
    );
  }
  return run;
}

function start(command: StartRefresh, run: RefreshRun): RefreshEvent[] {
  const d = command.data;
  if (run.status !== 'missing') {
    throw new DomainError(REFRESH_ALREADY_STARTED, `refresh run ${d.runId} already exists`);
  }
  return [{ type: 'RefreshStarted', data: { ...d } }];
}

const sameResult = (a: RecordedOutcome, b: RecordedOutcome): boolean =>
  a.outcome === b.outcome && a.beforeHash === b.beforeHash && a.afterHash === b.afterHash;

/**
 * The latest result for an address wins. A batch the client sends again
 * (its first answer lost) repeats what is already recorded and adds nothing,
 * so the counts stay those of distinct instances.
 */
function record(command: RecordRefreshResults, run: RefreshRun): RefreshEvent[] {
  const { runId, results } = command.data;
  const active = requireRunning(run, runId);
  // Of one batch, only an address's last result: the ones before it would be
  // replaced at once (a batch alternating two outcomes of one instance
  // 100,000 times wrote 100,000 events).
  const last = new Map<string, (typeof results)[number]>();
  for (const r of results) {
    last.delete(r.address);
    last.set(r.address, r);
  }
  const events: ResourceRefreshed[] = [];
  for (const r of last.values()) {
    const known = active.results.get(r.address);
    if (known && sameResult(known, r)) continue;
    events.push({
      type: 'ResourceRefreshed',
      data: {
        runId,
        stateId: active.stateId,
        address: r.address,
        provider: r.provider,
        outcome: r.outcome,
        beforeHash: r.beforeHash,
        afterHash: r.afterHash,
        changedPaths: [...r.changedPaths],
        ...(r.error !== undefined ? { error: r.error } : {}),
      },
    });
  }
  return events;
}

function finish(command: FinishRefresh, run: RefreshRun): RefreshEvent[] {
  const { runId, status, errorSummary, toVersion, toSerial } = command.data;
  const active = requireRunning(run, runId);
  const counts = countsOf(active);
  // Commit-on-zero-failures, never partial (ADR 0006), and a dry run never writes.
  if (toVersion !== null && (status !== 'succeeded' || active.dryRun || counts.failed > 0)) {
    throw new DomainError(
      REFRESH_INVALID,
      `refresh run ${runId} cannot have committed: ${
        active.dryRun ? 'it is a dry run' : `status ${status}, ${counts.failed} failed`
      }`,
    );
  }
  return [
    {
      type: 'RefreshFinished',
      data: {
        runId,
        stateId: active.stateId,
        status,
        ...counts,
        toVersion,
        toSerial: toVersion === null ? null : toSerial,
        errorSummary,
      },
    },
  ];
}

export function decideRefresh(command: RefreshCommand, run: RefreshRun): RefreshEvent[] {
  switch (command.type) {
    case 'StartRefresh':
      return start(command, run);
    case 'RecordRefreshResults':
      return record(command, run);
    case 'FinishRefresh':
      return finish(command, run);
    default:
      return assertNever(command);
  }
}

/**
 * A run records one event per instance, so the results map is copied once,
 * when the run starts, and updated in place afterwards (a copy per event
 * would make a 20k-instance run quadratic). Only the newest state object of
 * a run is ever used to decide; older ones see later results.
 */
export function evolveRefresh(run: RefreshRun, event: RefreshEvent): RefreshRun {
  switch (event.type) {
    case 'RefreshStarted':
      if (run.status !== 'missing') return run;
      return {
        status: 'running',
        ...event.data,
        results: new Map(),
        changed: 0,
        failed: 0,
        normalized: 0,
        skipped: 0,
      };
    case 'ResourceRefreshed': {
      if (run.status !== 'running') return run;
      const { address, outcome, beforeHash, afterHash } = event.data;
      const previous = run.results.get(address);
      const added = tally(outcome);
      const removed = previous ? tally(previous.outcome) : null;
      const next = { ...run };
      for (const k of ['changed', 'failed', 'normalized', 'skipped'] as const) {
        next[k] += added[k] - (removed?.[k] ?? 0);
      }
      run.results.set(address, { outcome, beforeHash, afterHash });
      return next;
    }
    case 'RefreshFinished':
      if (run.status !== 'running') return run;
      return {
        ...run,
        status: 'finished',
        outcome: event.data.status,
        toVersion: event.data.toVersion,
      };
    default:
      return assertNever(event);
  }
}

export const refreshRunDecider: Decider<RefreshCommand, RefreshRun, RefreshEvent> = {
  decide: decideRefresh,
  evolve: evolveRefresh,
  initialState: initialRefreshRun,
};
