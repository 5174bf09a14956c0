import type { RefreshResult, RefreshRunStatus } from '../../domain/refresh';
import type { JsonObject, StateDocumentV4 } from '../../domain/terraform';
import type { Caller } from '../command-context';
import { CommandWith } from '../props-message';

export interface StartedRun {
  runId: string;
  stateId: string;
  fromVersion: number;
  fromSerial: number;
}

export interface FinishedRun {
  runId: string;
  status: RefreshRunStatus;
  toVersion: number | null;
  checked: number;
  changed: number;
  failed: number;
  normalized: number;
  skipped: number;
}

export class StartRefreshRunCommand extends CommandWith<
  { stateName: string; dryRun: boolean; caller: Caller },
  StartedRun
>() {}

export class RecordRefreshResultsCommand extends CommandWith<
  { runId: string; results: RefreshResult[]; caller: Caller },
  { recorded: number }
>() {}

/** `document` is committed only when the run may commit (see planFinish). */
export class FinishRefreshRunCommand extends CommandWith<
  {
    runId: string;
    status: RefreshRunStatus;
    errorSummary: string | null;
    document: StateDocumentV4 | null;
    lockId: string | null;
    caller: Caller;
  },
  FinishedRun
>() {}

/**
 * `source` normalised by the caller; `alias` null for the default
 * configuration. `checkSchema` (default true) checks the config's keys
 * against the provider schemas kld has cached (when it has any).
 */
export class ConfigureProviderCommand extends CommandWith<
  {
    stateName: string;
    source: string;
    alias: string | null;
    config: JsonObject;
    checkSchema?: boolean;
    caller: Caller;
  },
  void
>() {}

export class RemoveProviderConfigCommand extends CommandWith<
  { stateName: string; source: string; alias: string | null; caller: Caller },
  void
>() {}
