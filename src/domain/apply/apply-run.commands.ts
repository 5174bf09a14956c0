import { CommandContext } from '../shared/event';
import { JsonValue } from '../terraform/json-value';
import { ApplyCounters, ApplyStarted, ApplyStatus } from './apply-run.events';

interface ApplyCommandOf<Type extends string, Data> {
  type: Type;
  data: Data;
  metadata: CommandContext;
}

/** Recorded once the run's reservations are granted on the state's stream. */
export type StartApply = ApplyCommandOf<'StartApply', ApplyStarted['data']>;

export type FinishApply = ApplyCommandOf<
  'FinishApply',
  {
    runId: string;
    status: ApplyStatus;
    version: number | null;
    serial: number | null;
    counters: ApplyCounters | null;
    errorSummary: string | null;
    outputState: JsonValue | null;
    checksum?: string;
  }
>;

export type ApplyCommand = StartApply | FinishApply;
