import { Decider } from '../shared/decider';
import { DomainError } from '../shared/domain-error';
import { APPLY_ALREADY_STARTED, APPLY_INVALID } from '../state/state.errors';
import { canonicalJson } from '../terraform/canonical-json';
import { JsonValue } from '../terraform/json-value';
import { ApplyCommand, FinishApply, StartApply } from './apply-run.commands';
import { APPLY_FINISHED, APPLY_NOT_FOUND } from './apply-run.errors';
import { ApplyEvent } from './apply-run.events';
import { ApplyRun, initialApplyRun } from './apply-run.model';

function assertNever(value: never): never {
  throw new Error(`unexpected ${JSON.stringify(value)}`);
}

export function applyNotFound(runId: string): DomainError {
  return new DomainError(APPLY_NOT_FOUND, `apply run ${runId} does not exist`);
}

/** Started once; the same start again is a retry whose answer was lost. */
function start(command: StartApply, run: ApplyRun): ApplyEvent[] {
  const d = command.data;
  if (run.status === 'missing') return [{ type: 'ApplyStarted', data: { ...d } }];
  if (
    canonicalJson(run.started as unknown as JsonValue) === canonicalJson(d as unknown as JsonValue)
  ) {
    return [];
  }
  throw new DomainError(APPLY_ALREADY_STARTED, `apply run ${d.runId} already exists`);
}

/** Finished once; the same finish again is a retry, another one is refused. */
function finish(command: FinishApply, run: ApplyRun): ApplyEvent[] {
  const d = command.data;
  if (run.status === 'missing') throw applyNotFound(d.runId);
  if ((d.status === 'committed') !== (d.version !== null && d.serial !== null)) {
    throw new DomainError(
      APPLY_INVALID,
      'a run has a version and serial exactly when it committed',
    );
  }
  if (run.status === 'finished') {
    if (run.outcome === d.status && run.version === d.version) return [];
    // The commit is stored in the State stream whatever the run's stream says: an abort or a
    // finish that raced it (and found no reservation left to release) recorded its ending
    // first. The commit is what happened; it is recorded over that ending.
    if (d.status === 'committed' && run.outcome !== 'committed') {
      return [{ type: 'ApplyFinished', data: { ...d, stateId: run.started.stateId } }];
    }
    throw new DomainError(
      APPLY_FINISHED,
      `apply run ${d.runId} already ended: ${run.outcome}` +
        (run.version === null ? '' : ` as version ${run.version}`),
      { status: run.outcome },
    );
  }
  return [{ type: 'ApplyFinished', data: { ...d, stateId: run.started.stateId } }];
}

export function decideApply(command: ApplyCommand, run: ApplyRun): ApplyEvent[] {
  switch (command.type) {
    case 'StartApply':
      return start(command, run);
    case 'FinishApply':
      return finish(command, run);
    default:
      return assertNever(command);
  }
}

export function evolveApply(run: ApplyRun, event: ApplyEvent): ApplyRun {
  switch (event.type) {
    case 'ApplyStarted':
      return run.status === 'missing' ? { status: 'running', started: event.data } : run;
    case 'ApplyFinished':
      if (run.status === 'missing') return run;
      // Once finished, only a commit that raced the ending recorded first changes it (finish).
      if (
        run.status === 'finished' &&
        (event.data.status !== 'committed' || run.outcome === 'committed')
      ) {
        return run;
      }
      return {
        status: 'finished',
        started: run.started,
        outcome: event.data.status,
        version: event.data.version,
        serial: event.data.serial,
        checksum: event.data.checksum ?? null,
      };
    default:
      return assertNever(event);
  }
}

export const applyRunDecider: Decider<ApplyCommand, ApplyRun, ApplyEvent> = {
  decide: decideApply,
  evolve: evolveApply,
  initialState: initialApplyRun,
};
