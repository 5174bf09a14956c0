import { deciderSpec } from '../../../test/support/decider-spec';
import { CommandContext } from '../shared/event';
import { ApplyCommand, FinishApply } from './apply-run.commands';
import { applyRunDecider } from './apply-run.decider';
import { ApplyEvent, ApplyStarted } from './apply-run.events';
import { applyRunFromSnapshot, applyRunToSnapshot } from './apply-run.snapshot';

const ctx: CommandContext = { actor: 'alice', correlationId: 'c', now: '2026-11-30T10:00:00.000Z' };
const { given } = deciderSpec(applyRunDecider);

const startedData: ApplyStarted['data'] = {
  runId: 'run-1',
  stateId: 'state-1',
  stateName: 'prod',
  lane: 'full',
  baseVersion: 3,
  writeSet: ['module.web.aws_instance.a[0]'],
  readSet: ['aws_vpc.main'],
  reservations: [
    { id: 'r0', glob: 'module.web.*', mode: 'write' },
    { id: 'r1', glob: 'aws_vpc.main', mode: 'read' },
  ],
  expiresAt: '2026-11-30T10:15:00.000Z',
  info: {},
};
const start: ApplyCommand = { type: 'StartApply', data: startedData, metadata: ctx };
const started: ApplyEvent = { type: 'ApplyStarted', data: startedData };

const finish = (data: Partial<FinishApply['data']>): ApplyCommand => ({
  type: 'FinishApply',
  data: {
    runId: 'run-1',
    status: 'committed',
    version: 4,
    serial: 12,
    counters: { add: 1, change: 0, destroy: 0 },
    errorSummary: null,
    outputState: null,
    ...data,
  },
  metadata: ctx,
});
const committed: ApplyEvent = {
  type: 'ApplyFinished',
  data: {
    runId: 'run-1',
    stateId: 'state-1',
    status: 'committed',
    version: 4,
    serial: 12,
    counters: { add: 1, change: 0, destroy: 0 },
    errorSummary: null,
    outputState: null,
  },
};

describe('ApplyRun decider', () => {
  it('starts once; the same start again is a retry, another is refused', () => {
    given().when(start).then([started]);
    given(started).when(start).then([]);
    given(started)
      .when({ ...start, data: { ...startedData, baseVersion: 4 } })
      .thenFails('APPLY.ALREADY_STARTED');
  });

  it('finishes a running run with what it did', () => {
    given(started).when(finish({})).then([committed]);
    const failed = finish({
      status: 'failed',
      version: null,
      serial: null,
      errorSummary: 'terraform apply failed',
      outputState: { version: 4, resources: [] },
    });
    given(started)
      .when(failed)
      .then([
        {
          type: 'ApplyFinished',
          data: {
            runId: 'run-1',
            stateId: 'state-1',
            status: 'failed',
            version: null,
            serial: null,
            counters: { add: 1, change: 0, destroy: 0 },
            errorSummary: 'terraform apply failed',
            outputState: { version: 4, resources: [] },
          },
        },
      ]);
  });

  it('takes the same finish again as a retry and refuses another ending', () => {
    given(started, committed).when(finish({})).then([]);
    given(started, committed)
      .when(finish({ status: 'aborted', version: null, serial: null }))
      .thenFails('APPLY.FINISHED', { status: 'committed' });
  });

  it('records a commit that an abort or a failure raced: the stored commit is how the run ended', () => {
    // The abort found the reservations already released by the commit, and was recorded first.
    const aborted: ApplyEvent = {
      type: 'ApplyFinished',
      data: { ...committed.data, status: 'aborted', version: null, serial: null, counters: null },
    } as ApplyEvent;
    given(started, aborted).when(finish({})).then([committed]);
    given(started, { ...aborted, data: { ...aborted.data, status: 'failed' } } as ApplyEvent)
      .when(finish({}))
      .then([committed]);
    // Recorded, it is the run's ending; a late abort changes nothing.
    given(started, aborted, committed).when(finish({})).then([]);
    given(started, aborted, committed)
      .when(finish({ status: 'aborted', version: null, serial: null }))
      .thenFails('APPLY.FINISHED', { status: 'committed' });
  });

  it('refuses a finish of a run that never started, and a commit without a version', () => {
    given().when(finish({})).thenFails('APPLY.NOT_FOUND');
    given(started)
      .when(finish({ version: null, serial: null }))
      .thenFails('APPLY.INVALID');
    given(started)
      .when(finish({ status: 'aborted' }))
      .thenFails('APPLY.INVALID');
  });

  it('round-trips through a snapshot', () => {
    for (const history of [[], [started], [started, committed]]) {
      const state = given(...history).state;
      expect(applyRunFromSnapshot(JSON.parse(JSON.stringify(applyRunToSnapshot(state))))).toEqual(
        state,
      );
    }
  });
});
