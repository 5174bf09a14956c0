import { CommandContext } from '../shared/event';
import { planFinish } from './finish-plan';
import { RefreshCommand } from './refresh-run.commands';
import { deciderSpec } from '../../../test/support/decider-spec';
import { refreshRunDecider } from './refresh-run.decider';
import { RefreshEvent, RefreshResult } from './refresh-run.events';
import { countsOf, initialRefreshRun, RefreshRun, RunFacts } from './refresh-run.model';
import {
  refreshRunFromSnapshot,
  refreshRunToSnapshot,
  refreshRunToSnapshotText,
} from './refresh-run.snapshot';

const ctx: CommandContext = { actor: 'ci', correlationId: 'c1', now: '2026-11-30T00:00:00.000Z' };
const RUN = 'run-1';
const STATE = 'state-1';

const startCmd = (dryRun = false): RefreshCommand => ({
  type: 'StartRefresh',
  data: { runId: RUN, stateId: STATE, stateName: 'prod', fromVersion: 3, fromSerial: 7, dryRun },
  metadata: ctx,
});
const recordCmd = (...results: RefreshResult[]): RefreshCommand => ({
  type: 'RecordRefreshResults',
  data: { runId: RUN, results },
  metadata: ctx,
});
const finishCmd = (
  status: 'succeeded' | 'failed' | 'cancelled',
  toVersion: number | null = null,
): RefreshCommand => ({
  type: 'FinishRefresh',
  data: { runId: RUN, status, errorSummary: null, toVersion, toSerial: toVersion && 8 },
  metadata: ctx,
});

const result = (
  address: string,
  outcome: RefreshResult['outcome'],
  afterHash: string | null = outcome === 'unchanged' ? 'h0' : `h-${address}`,
): RefreshResult => ({
  address,
  provider: 'provider["registry.terraform.io/hashicorp/aws"]',
  outcome,
  beforeHash: 'h0',
  afterHash,
  changedPaths: outcome === 'drifted' ? ['tags.Name'] : [],
  ...(outcome === 'failed' ? { error: 'AccessDenied' } : {}),
});

const { given, eventsOf } = deciderSpec(refreshRunDecider);

const started = (dryRun = false): RefreshEvent => ({
  type: 'RefreshStarted',
  data: { runId: RUN, stateId: STATE, stateName: 'prod', fromVersion: 3, fromSerial: 7, dryRun },
});
const refreshed = (...results: RefreshResult[]): RefreshEvent[] =>
  results.map((r) => ({ type: 'ResourceRefreshed', data: { runId: RUN, stateId: STATE, ...r } }));

const facts = (run: RefreshRun): RunFacts => {
  if (run.status === 'missing') throw new Error('no run');
  return run;
};

describe('RefreshRun decider', () => {
  it('starts a run at the version it read', () => {
    given()
      .when(startCmd())
      .then([
        {
          type: 'RefreshStarted',
          data: {
            runId: RUN,
            stateId: STATE,
            stateName: 'prod',
            fromVersion: 3,
            fromSerial: 7,
            dryRun: false,
          },
        },
      ]);
  });

  it('refuses to start a run twice and to touch a run that never started', () => {
    given(started()).when(startCmd()).thenFails('REFRESH.ALREADY_STARTED');
    given()
      .when(recordCmd(result('a', 'unchanged')))
      .thenFails('REFRESH.NOT_FOUND');
    given().when(finishCmd('failed')).thenFails('REFRESH.NOT_FOUND');
  });

  it('records one event per result, carrying the whole result', () => {
    const events = given(started())
      .when(recordCmd(result('a', 'unchanged'), result('b', 'drifted'), result('c', 'failed')))
      .events();
    expect(events.map((e) => e.type)).toEqual([
      'ResourceRefreshed',
      'ResourceRefreshed',
      'ResourceRefreshed',
    ]);
    expect(events[1]).toEqual({
      type: 'ResourceRefreshed',
      data: { runId: RUN, stateId: STATE, ...result('b', 'drifted') },
    });
  });

  it("records an address's last result of a batch only, however often the batch names it", () => {
    const flipping = Array.from({ length: 1000 }, (_, i) =>
      result('a', i % 2 === 0 ? 'drifted' : 'unchanged'),
    );
    const events = given(started())
      .when(recordCmd(result('b', 'gone'), ...flipping, result('b', 'failed')))
      .events();
    expect(events).toEqual([...refreshed(result('a', 'unchanged'), result('b', 'failed'))]);
    // Its last result the run holds already: nothing.
    given(started(), refreshed(result('a', 'unchanged')))
      .when(recordCmd(...flipping))
      .then([]);
  });

  it('counts distinct instances: checked, changed (drifted or gone) and failed', () => {
    const { state } = given(
      started(),
      refreshed(result('a', 'unchanged'), result('b', 'drifted')),
      refreshed(result('c', 'gone'), result('d', 'failed')),
    );
    expect(countsOf(facts(state))).toEqual({
      checked: 4,
      changed: 2,
      failed: 1,
      normalized: 0,
      skipped: 0,
    });
  });

  it('counts normalized reads apart from drift, and skipped built-ins apart from checked ones', () => {
    const { state } = given(
      started(),
      refreshed(result('a', 'normalized'), result('b', 'drifted'), result('c', 'skipped')),
      refreshed(result('d', 'skipped'), result('e', 'unchanged')),
    );
    expect(countsOf(facts(state))).toEqual({
      checked: 3,
      changed: 1,
      failed: 0,
      normalized: 1,
      skipped: 2,
    });
    // A later result for an address moves it between counters.
    const later = given(
      started(),
      refreshed(result('a', 'normalized')),
      refreshed(result('a', 'drifted')),
    );
    expect(countsOf(facts(later.state))).toMatchObject({ changed: 1, normalized: 0 });
  });

  it('ignores a batch sent again, and lets a later result for an address replace the earlier', () => {
    const batch = [result('a', 'failed'), result('b', 'drifted')];
    given(started(), refreshed(...batch))
      .when(recordCmd(...batch))
      .then([]);
    const { state } = given(started(), refreshed(...batch), refreshed(result('a', 'unchanged')));
    expect(countsOf(facts(state))).toMatchObject({ checked: 2, changed: 1, failed: 0 });
  });

  it('finishes with the counts, and refuses results or a second finish afterwards', () => {
    const history = [started(), refreshed(result('a', 'unchanged'), result('b', 'drifted'))];
    given(...history)
      .when(finishCmd('succeeded', 4))
      .then([
        {
          type: 'RefreshFinished',
          data: {
            runId: RUN,
            stateId: STATE,
            status: 'succeeded',
            checked: 2,
            changed: 1,
            failed: 0,
            normalized: 0,
            skipped: 0,
            toVersion: 4,
            toSerial: 8,
            errorSummary: null,
          },
        },
      ]);
    const finished = [...history, eventsOf(history, finishCmd('cancelled'))];
    given(...finished)
      .when(recordCmd(result('c', 'drifted')))
      .thenFails('REFRESH.FINISHED');
    given(...finished)
      .when(finishCmd('failed'))
      .thenFails('REFRESH.FINISHED');
  });

  it('never records a commit for a dry run or a run with failures', () => {
    given(started(true)).when(finishCmd('succeeded', 4)).thenFails('REFRESH.INVALID');
    given(started(), refreshed(result('a', 'failed')))
      .when(finishCmd('succeeded', 4))
      .thenFails('REFRESH.INVALID');
    given(started()).when(finishCmd('failed', 4)).thenFails('REFRESH.INVALID');
  });

  it('survives a snapshot round trip, counts included', () => {
    const history = [
      started(),
      refreshed(result('a', 'gone'), result('b', 'failed'), result('c', 'unchanged')),
      refreshed(result('d', 'normalized'), result('e', 'skipped')),
    ];
    const { state } = given(...history, eventsOf(history, finishCmd('failed')));
    expect(state.status).toBe('finished');
    const back = refreshRunFromSnapshot(JSON.parse(JSON.stringify(refreshRunToSnapshot(state))));
    expect(back).toEqual(state);
    expect(refreshRunFromSnapshot(refreshRunToSnapshot(initialRefreshRun()))).toEqual({
      status: 'missing',
    });
  });
});

describe('refreshRunToSnapshotText', () => {
  const outcomes = ['unchanged', 'drifted', 'gone', 'failed', 'normalized', 'skipped'] as const;
  const many = (n: number) =>
    refreshed(...Array.from({ length: n }, (_, i) => result(`a.r${i}`, outcomes[i % 6])));

  it('is the snapshot as JSON text, in pieces of a long run', () => {
    const runs = [
      initialRefreshRun(),
      given(started()).state,
      given(started(true), many(2_500)).state,
      given(started(), many(1_000), eventsOf([started(), many(1_000)], finishCmd('failed'))).state,
    ];
    for (const run of runs) {
      const pieces = [...refreshRunToSnapshotText(run)];
      expect(pieces.join('')).toBe(JSON.stringify(refreshRunToSnapshot(run)));
    }
    // 2,500 results: three pieces of them at least, between the head and the end.
    expect([...refreshRunToSnapshotText(runs[2])].length).toBeGreaterThanOrEqual(5);
  });
});

describe('planFinish', () => {
  const runOf = (dryRun: boolean, ...results: RefreshResult[]) =>
    facts(given(started(dryRun), refreshed(...results)).state);
  const clean = runOf(false, result('a', 'unchanged'), result('b', 'drifted'));

  it('commits a succeeded run with a document and no failures', () => {
    expect(
      planFinish(clean, { status: 'succeeded', errorSummary: null, hasDocument: true }),
    ).toEqual({ commit: true, status: 'succeeded', errorSummary: null });
  });

  it('commits nothing for a dry run, a run without a document, or one that did not succeed', () => {
    const dry = runOf(true, result('a', 'drifted'));
    expect(planFinish(dry, { status: 'succeeded', errorSummary: null, hasDocument: true })).toEqual(
      { commit: false, status: 'succeeded', errorSummary: null },
    );
    expect(
      planFinish(clean, { status: 'succeeded', errorSummary: null, hasDocument: false }).commit,
    ).toBe(false);
    expect(
      planFinish(clean, { status: 'cancelled', errorSummary: 'interrupted', hasDocument: true }),
    ).toEqual({ commit: false, status: 'cancelled', errorSummary: 'interrupted' });
  });

  it('records a "succeeded" run with failed instances as failed, committing nothing', () => {
    const failing = runOf(false, result('a', 'unchanged'), result('b', 'failed'));
    expect(
      planFinish(failing, { status: 'succeeded', errorSummary: null, hasDocument: true }),
    ).toEqual({
      commit: false,
      status: 'failed',
      errorSummary: '1 of 2 instances failed to refresh; nothing committed',
    });
  });
});
