import { DomainError } from '../shared/domain-error';
import { isJsonObject } from '../terraform/json-value';
import { ApplyStarted, ApplyStatus } from './apply-run.events';
import { ApplyRun } from './apply-run.model';

/** Bump when the snapshot shape changes; older snapshots are then ignored and the stream replayed. */
export const APPLY_RUN_SNAPSHOT_SCHEMA = 'apply-run/1';

/** A run is two events long, so a snapshot is rarely written; it is the model as JSON. */
export function applyRunToSnapshot(run: ApplyRun): unknown {
  return run;
}

export function applyRunFromSnapshot(json: unknown): ApplyRun {
  const bad = (): never => {
    throw new DomainError('SNAPSHOT.INVALID', 'apply run snapshot');
  };
  if (!isJsonObject(json)) return bad();
  if (json.status === 'missing') return { status: 'missing' };
  if (!isJsonObject(json.started) || typeof json.started.runId !== 'string') return bad();
  const started = json.started as unknown as ApplyStarted['data'];
  if (json.status === 'running') return { status: 'running', started };
  if (json.status !== 'finished' || typeof json.outcome !== 'string') return bad();
  return {
    status: 'finished',
    started,
    outcome: json.outcome as ApplyStatus,
    version: typeof json.version === 'number' ? json.version : null,
    serial: typeof json.serial === 'number' ? json.serial : null,
    checksum: typeof json.checksum === 'string' ? json.checksum : null,
  };
}
