import { CommandBus } from '@nestjs/cqrs';
import type { ProviderSchemaCache } from '../../application/ports/provider-schema-cache.port';
import {
  FinishedRun,
  FinishRefreshRunCommand,
  RecordRefreshResultsCommand,
  StartedRun,
  StartRefreshRunCommand,
} from '../../application/refresh/refresh-commands';
import type {
  FinishRefreshRun,
  LockOutcome,
  RefreshServerPort,
  StartRefreshRun,
} from '../../application/refresh/refresh-server.port';
import { LockStateCommand, UnlockStateCommand } from '../../application/state/state-commands';
import type { Caller } from '../../application/state/state-commands';
import type { ProviderSchema } from '../../domain/cty/schema';
import type { RefreshResult } from '../../domain/refresh';
import { DomainError } from '../../domain/shared/domain-error';
import { LockInfo, STATE_LOCKED, STATE_NOT_FOUND } from '../../domain/state';
import type { JsonObject } from '../../domain/terraform';
import { normaliseProviderSource } from '../provider/provider-address';
import { RefreshReadModel } from '../read-models/refresh-read-model';
import { StateDocumentReadModel } from '../read-models/state-document-read-model';

/**
 * The refresh server port inside kld: the same commands and read models the
 * REST endpoints use, without the HTTP round trips, so a server-side refresh
 * behaves exactly like `kl refresh` (same run records, same lock, same
 * commit rule).
 */
export class InProcessRefreshServer implements RefreshServerPort {
  constructor(
    private readonly commands: CommandBus,
    private readonly states: StateDocumentReadModel,
    private readonly refresh: RefreshReadModel,
    private readonly schemas: ProviderSchemaCache,
    private readonly caller: Caller,
  ) {}

  async getState(name: string): Promise<string> {
    const current = await this.states.current(name);
    if (current === null) {
      throw new DomainError(STATE_NOT_FOUND, `state ${name} does not exist or has no document`);
    }
    return current.document;
  }

  async lock(name: string, info: LockInfo): Promise<LockOutcome> {
    try {
      await this.commands.execute(
        new LockStateCommand({ name, lockInfo: { ...info }, caller: this.caller }),
      );
      return { acquired: true };
    } catch (err) {
      const holder = err instanceof DomainError ? err.metadata.holder : undefined;
      if (err instanceof DomainError && err.code === STATE_LOCKED && holder) {
        return { acquired: false, holder: holder as LockInfo };
      }
      throw err;
    }
  }

  async unlock(name: string, info: LockInfo): Promise<void> {
    await this.commands.execute(
      new UnlockStateCommand({ name, lockId: info.ID, caller: this.caller }),
    );
  }

  async startRun(request: StartRefreshRun): Promise<StartedRun> {
    const caller = { ...this.caller, actor: request.actor ?? this.caller.actor };
    return this.commands.execute(
      new StartRefreshRunCommand({ stateName: request.state, dryRun: request.dryRun, caller }),
    );
  }

  async recordResults(runId: string, results: RefreshResult[]): Promise<void> {
    await this.commands.execute(
      new RecordRefreshResultsCommand({ runId, results, caller: this.caller }),
    );
  }

  finishRun(runId: string, request: FinishRefreshRun): Promise<FinishedRun> {
    return this.commands.execute(
      new FinishRefreshRunCommand({
        runId,
        status: request.status,
        errorSummary: request.errorSummary ?? null,
        document: request.document ?? null,
        lockId: request.lockId ?? null,
        caller: this.caller,
      }),
    );
  }

  async getProviderConfig(
    state: string,
    source: string,
    alias: string | null,
  ): Promise<JsonObject | null> {
    const stored = await this.refresh.providerConfig(state, normaliseProviderSource(source), alias);
    return stored?.config ?? null;
  }

  getProviderSchema(source: string, version: string): Promise<ProviderSchema | null> {
    return this.schemas.get(normaliseProviderSource(source), version);
  }

  putProviderSchema(source: string, version: string, schema: ProviderSchema): Promise<void> {
    return this.schemas.put(normaliseProviderSource(source), version, schema);
  }
}
