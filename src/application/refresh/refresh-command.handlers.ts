import { createHash } from 'node:crypto';
import { Inject } from '@nestjs/common';
import { CommandBus, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import {
  countsOf,
  planFinish,
  PROVIDER_CONFIG_INVALID,
  REFRESH_INVALID,
  REFRESH_STATE_CHANGED,
  refreshStreamId,
  requireRunning,
} from '../../domain/refresh';
import { DomainError } from '../../domain/shared/domain-error';
import { STATE_NOT_FOUND, STATE_VERSION_CONFLICT } from '../../domain/state';
import { EVENT_STORE, type EventStore } from '../ports/event-store.port';
import { COMMAND_METRICS, type CommandMetrics } from '../ports/metrics.port';
import {
  awaitReadModels,
  READ_MODEL_SYNC,
  type ReadModelSync,
  SERVER_LAGGING,
} from '../ports/read-model-sync.port';
import { CommitStateCommand } from '../state/state-commands';
import { DeciderService } from '../decider.service';
import { PROVIDER_CONFIGS, REFRESH_RUN } from './refresh-aggregates';
import {
  ConfigureProviderCommand,
  FinishedRun,
  FinishRefreshRunCommand,
  RecordRefreshResultsCommand,
  RemoveProviderConfigCommand,
  StartedRun,
  StartRefreshRunCommand,
} from './refresh-commands';
import { shapeProviderConfig } from './provider-config';
import { RefreshError } from './refresh-error';
import {
  PROVIDER_BLOCK_SCHEMAS,
  ProviderBlockSchemas,
  REFRESH_STATE_LOOKUP,
  RefreshStateLookup,
} from './refresh-read.port';

@CommandHandler(StartRefreshRunCommand)
export class StartRefreshRunHandler implements ICommandHandler<StartRefreshRunCommand> {
  constructor(
    private readonly deciders: DeciderService,
    @Inject(REFRESH_STATE_LOOKUP) private readonly states: RefreshStateLookup,
  ) {}

  async execute(c: StartRefreshRunCommand): Promise<StartedRun> {
    const current = await this.states.currentVersion(c.stateName);
    if (current === null) {
      throw new DomainError(
        STATE_NOT_FOUND,
        `state ${c.stateName} does not exist or has nothing committed to refresh`,
      );
    }
    const runId = this.deciders.newId();
    await this.deciders.execute(REFRESH_RUN, {
      type: 'StartRefresh',
      data: {
        runId,
        stateId: current.stateId,
        stateName: c.stateName,
        fromVersion: current.version,
        fromSerial: current.serial,
        dryRun: c.dryRun,
      },
      metadata: this.deciders.context(c.caller),
    });
    return {
      runId,
      stateId: current.stateId,
      fromVersion: current.version,
      fromSerial: current.serial,
    };
  }
}

@CommandHandler(RecordRefreshResultsCommand)
export class RecordRefreshResultsHandler implements ICommandHandler<RecordRefreshResultsCommand> {
  constructor(
    private readonly deciders: DeciderService,
    @Inject(REFRESH_STATE_LOOKUP) private readonly states: RefreshStateLookup,
    @Inject(EVENT_STORE) private readonly events: EventStore,
    @Inject(READ_MODEL_SYNC) private readonly sync: ReadModelSync,
  ) {}

  async execute(c: RecordRefreshResultsCommand): Promise<{ recorded: number }> {
    // A result for an instance the refreshed version does not have would
    // count as drift or failure of nothing, and could fail the run.
    const run = requireRunning(
      await this.deciders.state(REFRESH_RUN, refreshStreamId(c.runId)),
      c.runId,
    );
    const addresses = c.results.map((r) => r.address);
    let unknown = await this.states.addressesNotIn(run.stateId, run.fromVersion, addresses);
    if (unknown.length > 0) {
      // The instances are read from a read model, which may not show the
      // run's version yet (its commit answered on another replica): refuse
      // only what it still lacks once it shows everything written so far.
      await awaitReadModels(this.sync, await this.events.lastPosition(), () => 'nothing recorded');
      unknown = await this.states.addressesNotIn(run.stateId, run.fromVersion, addresses);
    }
    if (unknown.length > 0) {
      throw new DomainError(
        REFRESH_INVALID,
        `refresh results name ${unknown.length} instance(s) version ${run.fromVersion} of state ${run.stateName} does not have: ${listed(unknown)}; nothing was recorded`,
        { addresses: unknown.slice(0, 100) },
      );
    }
    await this.deciders.execute(REFRESH_RUN, {
      type: 'RecordRefreshResults',
      data: { runId: c.runId, results: c.results },
      metadata: this.deciders.context(c.caller),
    });
    // A repeated result is recorded already; the caller counts what it sent.
    return { recorded: c.results.length };
  }
}

/**
 * Commits the refreshed document (when the run may commit) and then records
 * the finish. The commit names the version the run started from: if anyone
 * wrote the state meanwhile, committing would undo their write, so the run
 * fails instead and the caller learns why.
 */
@CommandHandler(FinishRefreshRunCommand)
export class FinishRefreshRunHandler implements ICommandHandler<FinishRefreshRunCommand> {
  constructor(
    private readonly deciders: DeciderService,
    private readonly commands: CommandBus,
    @Inject(EVENT_STORE) private readonly events: EventStore,
    @Inject(COMMAND_METRICS) private readonly metrics: CommandMetrics,
  ) {}

  async execute(c: FinishRefreshRunCommand): Promise<FinishedRun> {
    const run = requireRunning(
      await this.deciders.state(REFRESH_RUN, refreshStreamId(c.runId)),
      c.runId,
    );
    const plan = planFinish(run, {
      status: c.status,
      errorSummary: c.errorSummary,
      hasDocument: c.document !== null,
    });
    let { status, errorSummary } = plan;
    let toVersion: number | null = null;
    let toSerial: number | null = null;
    let refusal: DomainError | null = null;
    if (plan.commit && c.document !== null) {
      try {
        const text = JSON.stringify(c.document);
        const checksum = createHash('sha256').update(text).digest('hex');
        const { version } = await this.commands.execute(
          new CommitStateCommand({
            name: run.stateName,
            document: c.document,
            checksum,
            bytes: Buffer.byteLength(text),
            lockId: c.lockId,
            source: 'refresh',
            caller: c.caller,
            baseVersion: run.fromVersion,
          }),
        );
        toVersion = version;
        toSerial = version === null ? null : c.document.serial;
      } catch (err) {
        // Anything but a refusal (the database went away, or the commit is
        // stored but not yet readable) leaves the run running, so the caller
        // may send the finish again; a retried commit is not written twice.
        if (!(err instanceof DomainError) || err.code === SERVER_LAGGING) throw err;
        refusal = stateChanged(err, run.fromVersion) ?? err;
        status = 'failed';
        errorSummary = refusal.message;
      }
    }
    const metadata = this.deciders.context(c.caller);
    const { state: finished, events } = await this.deciders.execute(REFRESH_RUN, {
      type: 'FinishRefresh',
      data: { runId: c.runId, status, errorSummary, toVersion, toSerial },
      metadata,
    });
    if (events.length > 0) void this.observeFinish(c.runId, status, metadata.now);
    if (refusal) throw refusal;
    const counts = finished.status === 'missing' ? countsOf(run) : countsOf(finished);
    return { runId: c.runId, status, toVersion, ...counts };
  }

  /** The run's duration runs from its RefreshStarted, which any replica may have written. */
  private async observeFinish(runId: string, status: string, finishedAt: string): Promise<void> {
    let seconds: number | null = null;
    try {
      const [started] = await this.events.readStream(refreshStreamId(runId), { maxCount: 1 });
      const ms = Date.parse(finishedAt) - Date.parse(started?.metadata.occurredAt ?? '');
      if (Number.isFinite(ms) && ms >= 0) seconds = ms / 1000;
    } catch {
      // counted without a duration
    }
    this.metrics.refreshRunFinished({ status, seconds });
  }
}

/** The first few, JSON-quoted (an address may hold any character), and how many more. */
function listed(addresses: string[]): string {
  const shown = addresses.slice(0, 5).map((a) => JSON.stringify(a));
  return addresses.length > 5
    ? `${shown.join(', ')} and ${addresses.length - 5} more`
    : shown.join(', ');
}

function stateChanged(err: DomainError, from: number): DomainError | null {
  if (err.code !== STATE_VERSION_CONFLICT && err.code !== STATE_NOT_FOUND) return null;
  const actual = err.code === STATE_NOT_FOUND ? 'deleted' : String(err.metadata.actual);
  return new DomainError(
    REFRESH_STATE_CHANGED,
    `state changed during refresh (version ${from} → ${actual})`,
    { fromVersion: from, actual },
  );
}

/**
 * Stores a provider config for a live state. A config for a state that does
 * not exist would wait unseen for a namesake; one the provider cannot take
 * would only fail at the next refresh, so its keys are checked against the
 * provider's schema when kld has cached one (any cached version that takes
 * it will do: the refresh may run another version).
 */
@CommandHandler(ConfigureProviderCommand)
export class ConfigureProviderHandler implements ICommandHandler<ConfigureProviderCommand> {
  constructor(
    private readonly deciders: DeciderService,
    @Inject(REFRESH_STATE_LOOKUP) private readonly states: RefreshStateLookup,
    @Inject(PROVIDER_BLOCK_SCHEMAS) private readonly schemas: ProviderBlockSchemas,
  ) {}

  async execute(c: ConfigureProviderCommand): Promise<void> {
    if (!(await this.states.stateExists(c.stateName))) {
      throw new DomainError(
        STATE_NOT_FOUND,
        `state ${c.stateName} does not exist: provider configs belong to a state, so create it first (terraform apply through the http backend, or kl import)`,
      );
    }
    if (c.checkSchema ?? true) await this.checkAgainstSchemas(c);
    await this.deciders.execute(PROVIDER_CONFIGS, {
      type: 'ConfigureProvider',
      data: { state: c.stateName, source: c.source, alias: c.alias, config: c.config },
      metadata: this.deciders.context(c.caller),
    });
  }

  private async checkAgainstSchemas(c: ConfigureProviderCommand): Promise<void> {
    const known = await this.schemas.providerBlocks(c.source);
    let refusal: string | null = null;
    for (const { version, block } of known) {
      try {
        shapeProviderConfig(block, c.config, `provider ${c.source} ${version}`);
        return;
      } catch (e) {
        if (!(e instanceof RefreshError)) throw e;
        refusal ??= e.message;
      }
    }
    if (refusal !== null) {
      throw new DomainError(
        PROVIDER_CONFIG_INVALID,
        `${refusal}${known.length > 1 ? ` (nor in ${known.length - 1} older cached version(s))` : ''}; if a newer provider release takes it, refresh once with that release, or store the config unchecked (kl provider configure --no-schema-check, or "skip_schema_check": true)`,
      );
    }
  }
}

@CommandHandler(RemoveProviderConfigCommand)
export class RemoveProviderConfigHandler implements ICommandHandler<RemoveProviderConfigCommand> {
  constructor(private readonly deciders: DeciderService) {}

  async execute(c: RemoveProviderConfigCommand): Promise<void> {
    await this.deciders.execute(PROVIDER_CONFIGS, {
      type: 'RemoveProviderConfig',
      data: { state: c.stateName, source: c.source, alias: c.alias },
      metadata: this.deciders.context(c.caller),
    });
  }
}

export const REFRESH_COMMAND_HANDLERS = [
  StartRefreshRunHandler,
  RecordRefreshResultsHandler,
  FinishRefreshRunHandler,
  ConfigureProviderHandler,
  RemoveProviderConfigHandler,
];
