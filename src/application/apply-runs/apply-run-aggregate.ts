import {
  APPLY_RUN_SNAPSHOT_SCHEMA,
  ApplyCommand,
  ApplyEvent,
  ApplyRun,
  applyRunDecider,
  applyRunFromSnapshot,
  applyRunToSnapshot,
  applyStreamId,
} from '../../domain/apply';
import type { AggregateSpec } from '../decider.service';

/** One ApplyRun aggregate per `kl apply` run (`apply-<runId>`), for the DeciderService. */
export const APPLY_RUN: AggregateSpec<ApplyCommand, ApplyRun, ApplyEvent> = {
  name: 'apply-run',
  decider: applyRunDecider,
  streamOf: (command) => applyStreamId(command.data.runId),
  snapshots: {
    schema: APPLY_RUN_SNAPSHOT_SCHEMA,
    to: applyRunToSnapshot,
    from: applyRunFromSnapshot,
  },
  done: (command) =>
    command.type === 'StartApply'
      ? `apply run ${command.data.runId} started`
      : `apply run ${command.data.runId} ended (${command.data.status})`,
};
