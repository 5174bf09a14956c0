import {
  PROVIDER_CONFIGS_SNAPSHOT_SCHEMA,
  ProviderConfigCommand,
  ProviderConfigEvent,
  ProviderConfigs,
  providerConfigsDecider,
  providerConfigsFromSnapshot,
  providerConfigsStreamId,
  providerConfigsToSnapshot,
  REFRESH_RUN_SNAPSHOT_SCHEMA,
  RefreshCommand,
  RefreshEvent,
  RefreshRun,
  refreshRunDecider,
  refreshRunFromSnapshot,
  refreshRunToSnapshot,
  refreshStreamId,
} from '../../domain/refresh';
import type { CommandContext } from '../../domain/shared/event';
import { AggregateStore } from '../aggregate-store';
import type { Clock, Ids } from '../ports/clock.port';
import type { EventStore } from '../ports/event-store.port';
import { awaitReadModels, ReadModelSync } from '../ports/read-model-sync.port';
import type { SnapshotStore } from '../ports/snapshot-store.port';
import { Caller, commandContext } from '../command-context';

export const REFRESH_AGGREGATES = Symbol('RefreshAggregates');

/**
 * The refresh slice's two aggregates: one RefreshRun per run, one
 * ProviderConfigs per state name. Like the State aggregate, a command answers
 * only once the read models include its events.
 */
export class RefreshAggregates {
  private readonly runs: AggregateStore<RefreshCommand, RefreshRun, RefreshEvent>;
  private readonly configs: AggregateStore<
    ProviderConfigCommand,
    ProviderConfigs,
    ProviderConfigEvent
  >;

  constructor(
    events: EventStore,
    snapshots: SnapshotStore,
    private readonly sync: ReadModelSync,
    private readonly clock: Clock,
    private readonly ids: Ids,
  ) {
    this.runs = new AggregateStore(events, snapshots, refreshRunDecider, {
      ids,
      snapshotSchema: REFRESH_RUN_SNAPSHOT_SCHEMA,
      toSnapshot: refreshRunToSnapshot,
      fromSnapshot: refreshRunFromSnapshot,
      // A snapshot holds every address of the run: rarer than the State's.
      snapshotEvery: 2000,
      cacheSize: 100,
    });
    this.configs = new AggregateStore(events, snapshots, providerConfigsDecider, {
      ids,
      snapshotSchema: PROVIDER_CONFIGS_SNAPSHOT_SCHEMA,
      toSnapshot: providerConfigsToSnapshot,
      fromSnapshot: providerConfigsFromSnapshot,
    });
  }

  context(caller: Caller): CommandContext {
    return commandContext(caller, this.clock);
  }

  newRunId(): string {
    return this.ids.uuid();
  }

  run(runId: string): Promise<RefreshRun> {
    return this.runs.state(refreshStreamId(runId));
  }

  async executeRun(command: RefreshCommand): Promise<{ events: RefreshEvent[]; run: RefreshRun }> {
    const result = await this.runs.handle(
      refreshStreamId(command.data.runId),
      command,
      command.metadata,
    );
    await awaitReadModels(
      this.sync,
      result.readAt,
      () => `refresh run ${command.data.runId} recorded`,
    );
    return { events: result.events, run: result.state };
  }

  async executeConfig(command: ProviderConfigCommand): Promise<ProviderConfigEvent[]> {
    const result = await this.configs.handle(
      providerConfigsStreamId(command.data.state),
      command,
      command.metadata,
    );
    await awaitReadModels(
      this.sync,
      result.readAt,
      () => `provider config of state ${command.data.state} saved`,
    );
    return result.events;
  }
}
