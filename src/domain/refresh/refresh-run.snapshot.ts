import { DomainError } from '../shared/domain-error';
import { jsonListPieces, mapped } from '../shared/json-list-pieces';
import { RefreshOutcome, RefreshRunStatus } from './refresh-run.events';
import { RecordedOutcome, RefreshRun, tally } from './refresh-run.model';

/** Bump when the snapshot shape changes; older snapshots are then ignored and the stream replayed. */
export const REFRESH_RUN_SNAPSHOT_SCHEMA = 'refresh-run/1';

type ResultTuple = [address: string, outcome: RefreshOutcome, before: string, after: string | null];

export type RefreshRunSnapshot =
  | { status: 'missing' }
  | {
      status: 'running' | 'finished';
      runId: string;
      stateId: string;
      stateName: string;
      fromVersion: number;
      fromSerial: number;
      dryRun: boolean;
      results: ResultTuple[];
      outcome?: RefreshRunStatus;
      toVersion?: number | null;
    };

export function refreshRunToSnapshot(run: RefreshRun): RefreshRunSnapshot {
  if (run.status === 'missing') return { status: 'missing' };
  const results = [...run.results].map(([address, r]): ResultTuple => [
    address,
    r.outcome,
    r.beforeHash,
    r.afterHash,
  ]);
  const { changed: _c, failed: _f, normalized: _n, skipped: _s, results: _r, ...facts } = run;
  return { ...facts, results };
}

/**
 * The snapshot's JSON text, exactly `JSON.stringify(refreshRunToSnapshot(run))`,
 * in pieces: the results (one per address of the run) a thousand at a time,
 * read from the run as the pieces are asked for, so a writer can let other
 * work run between pieces. The run must not change meanwhile; evolve never
 * changes a run it returned.
 */
export function* refreshRunToSnapshotText(run: RefreshRun): Generator<string> {
  if (run.status === 'missing') {
    yield JSON.stringify(refreshRunToSnapshot(run));
    return;
  }
  const { changed: _c, failed: _f, normalized: _n, skipped: _s, results, ...facts } = run;
  // `results` last, as refreshRunToSnapshot spreads them; facts always hold `status`.
  yield `${JSON.stringify(facts).slice(0, -1)},"results":`;
  yield* jsonListPieces(
    mapped(results, ([address, r]): ResultTuple => [address, r.outcome, r.beforeHash, r.afterHash]),
  );
  yield '}';
}

export function refreshRunFromSnapshot(json: unknown): RefreshRun {
  const s = json as RefreshRunSnapshot;
  if (s?.status === 'missing') return { status: 'missing' };
  if ((s?.status !== 'running' && s?.status !== 'finished') || !Array.isArray(s.results)) {
    throw new DomainError('SNAPSHOT.INVALID', 'malformed refresh run snapshot');
  }
  const results = new Map<string, RecordedOutcome>();
  const counts = { changed: 0, failed: 0, normalized: 0, skipped: 0 };
  for (const [address, outcome, beforeHash, afterHash] of s.results) {
    results.set(address, { outcome, beforeHash, afterHash });
    const t = tally(outcome);
    for (const k of Object.keys(counts) as (keyof typeof counts)[]) counts[k] += t[k];
  }
  const facts = {
    runId: s.runId,
    stateId: s.stateId,
    stateName: s.stateName,
    fromVersion: s.fromVersion,
    fromSerial: s.fromSerial,
    dryRun: s.dryRun,
    results,
    ...counts,
  };
  return s.status === 'running'
    ? { status: 'running', ...facts }
    : {
        status: 'finished',
        ...facts,
        outcome: s.outcome ?? 'failed',
        toVersion: s.toVersion ?? null,
      };
}
