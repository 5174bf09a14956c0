import { CommandContext } from '../shared/event';
import { RefreshResult, RefreshRunStatus } from './refresh-run.events';

interface RefreshCommandOf<Type extends string, Data> {
  type: Type;
  data: Data;
  metadata: CommandContext;
}

export type StartRefresh = RefreshCommandOf<
  'StartRefresh',
  {
    runId: string;
    stateId: string;
    stateName: string;
    fromVersion: number;
    fromSerial: number;
    dryRun: boolean;
  }
>;

export type RecordRefreshResults = RefreshCommandOf<
  'RecordRefreshResults',
  { runId: string; results: RefreshResult[] }
>;

/** `toVersion` is set only when the run's document was committed before finishing. */
export type FinishRefresh = RefreshCommandOf<
  'FinishRefresh',
  {
    runId: string;
    status: RefreshRunStatus;
    errorSummary: string | null;
    toVersion: number | null;
    toSerial: number | null;
  }
>;

export type RefreshCommand = StartRefresh | RecordRefreshResults | FinishRefresh;
