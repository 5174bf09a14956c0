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
  refreshRunToSnapshotText,
  refreshStreamId,
} from '../../domain/refresh';
import type { AggregateSpec } from '../decider.service';

/** One RefreshRun per run, for the DeciderService. */
export const REFRESH_RUN: AggregateSpec<RefreshCommand, RefreshRun, RefreshEvent> = {
  name: 'refresh-run',
  decider: refreshRunDecider,
  streamOf: (command) => refreshStreamId(command.data.runId),
  snapshots: {
    schema: REFRESH_RUN_SNAPSHOT_SCHEMA,
    to: refreshRunToSnapshot,
    // In pieces: the results of a 20,000-address run written at once held kld's thread.
    text: refreshRunToSnapshotText,
    from: refreshRunFromSnapshot,
    // A snapshot holds every address of the run: rarer than the State's.
    every: 2000,
  },
  cacheBudget: 'refreshRuns',
  done: (command) => `refresh run ${command.data.runId} recorded`,
};

/** One ProviderConfigs per state name, for the DeciderService. */
export const PROVIDER_CONFIGS: AggregateSpec<
  ProviderConfigCommand,
  ProviderConfigs,
  ProviderConfigEvent
> = {
  name: 'provider-configs',
  decider: providerConfigsDecider,
  streamOf: (command) => providerConfigsStreamId(command.data.state),
  snapshots: {
    schema: PROVIDER_CONFIGS_SNAPSHOT_SCHEMA,
    to: providerConfigsToSnapshot,
    from: providerConfigsFromSnapshot,
  },
  done: (command) => `provider config of state ${command.data.state} saved`,
};
