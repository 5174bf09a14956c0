import { Command } from '@nestjs/cqrs';
import type { RefreshResult, RefreshRunStatus } from '../../domain/refresh';
import type { JsonObject, StateDocumentV4 } from '../../domain/terraform';
import type { Caller } from '../state/state-commands';

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

export class StartRefreshRunCommand extends Command<StartedRun> {
  constructor(
    public readonly stateName: string,
    public readonly dryRun: boolean,
    public readonly caller: Caller,
  ) {
    super();
  }
}

export class RecordRefreshResultsCommand extends Command<{ recorded: number }> {
  constructor(
    public readonly runId: string,
    public readonly results: RefreshResult[],
    public readonly caller: Caller,
  ) {
    super();
  }
}

/** `document` is committed only when the run may commit (see planFinish). */
export class FinishRefreshRunCommand extends Command<FinishedRun> {
  constructor(
    public readonly runId: string,
    public readonly status: RefreshRunStatus,
    public readonly errorSummary: string | null,
    public readonly document: StateDocumentV4 | null,
    public readonly lockId: string | null,
    public readonly caller: Caller,
  ) {
    super();
  }
}

/**
 * `source` normalised by the caller; `alias` null for the default
 * configuration. `checkSchema` checks the config's keys against the
 * provider schemas kld has cached (when it has any).
 */
export class ConfigureProviderCommand extends Command<void> {
  constructor(
    public readonly stateName: string,
    public readonly source: string,
    public readonly alias: string | null,
    public readonly config: JsonObject,
    public readonly caller: Caller,
    public readonly checkSchema = true,
  ) {
    super();
  }
}

export class RemoveProviderConfigCommand extends Command<void> {
  constructor(
    public readonly stateName: string,
    public readonly source: string,
    public readonly alias: string | null,
    public readonly caller: Caller,
  ) {
    super();
  }
}
