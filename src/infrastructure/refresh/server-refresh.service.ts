import type { BeforeApplicationShutdown } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import type { ProviderSchemaCache } from '../../application/ports/provider-schema-cache.port';
import type { EnvPolicy } from '../../application/refresh/provider-config';
import type { RefreshHost } from '../../application/refresh/refresh-host';
import { RefreshOrchestrator } from '../../application/refresh/refresh-orchestrator';
import type { RefreshReport } from '../../application/refresh/refresh-report';
import type { Caller } from '../../application/state/state-commands';
import type { Logger } from '../logging/logger';
import { CachedSchemaProviderFactory } from '../provider/provider-factory';
import { RefreshReadModel } from '../read-models/refresh-read-model';
import { StateDocumentReadModel } from '../read-models/state-document-read-model';
import { FactoryProviderOpener } from './factory-provider-opener';
import { InProcessRefreshServer } from './in-process-refresh-server';

export interface ServerRefreshProps {
  commands: CommandBus;
  states: StateDocumentReadModel;
  refresh: RefreshReadModel;
  schemas: ProviderSchemaCache;
  /** Which `{"env": …}` names a run may read (KL_REFRESH_ENV_ALLOW). */
  envPolicy: EnvPolicy;
  logger: Logger;
  /** Clock, ids, environment and CPU count of the kld host. */
  host: RefreshHost;
}

export interface ServerRefreshOptions {
  dryRun: boolean;
  caller: Caller;
}

/**
 * Runs the client's refresh use case on the kld host: providers are found
 * through KL_PROVIDER_PATH and Terraform's usual directories on this
 * machine, `{"env": …}` config values come from kld's environment, for the
 * names the operator allows (KL_REFRESH_ENV_ALLOW) and no others. Shutdown
 * cancels runs in flight, which finish as `cancelled` and commit nothing.
 */
export class ServerRefreshService implements BeforeApplicationShutdown {
  private readonly active = new Set<AbortController>();

  private readonly logger: Logger;
  private readonly host: RefreshHost;

  constructor(private readonly props: ServerRefreshProps) {
    this.logger = props.logger;
    this.host = props.host;
  }

  async run(
    name: string,
    options: ServerRefreshOptions,
    signal: AbortSignal,
  ): Promise<RefreshReport> {
    const { commands, states, refresh, schemas, envPolicy } = this.props;
    const server = new InProcessRefreshServer(commands, states, refresh, schemas, options.caller);
    const opener = new FactoryProviderOpener(new CachedSchemaProviderFactory(schemas));
    const orchestrator = new RefreshOrchestrator(server, opener, this.host, {
      clientVersion: 'kld',
      envPolicy,
    });
    const local = new AbortController();
    const abort = () => local.abort();
    signal.addEventListener('abort', abort, { once: true });
    if (signal.aborted) local.abort();
    this.active.add(local);
    const started = this.host.clock.now().getTime();
    try {
      const report = await orchestrator.run(
        name,
        {
          dryRun: options.dryRun,
          failFast: false,
          actor: options.caller.actor,
          providerSearchPaths: [],
        },
        local.signal,
      );
      this.logger.info(
        {
          state: name,
          runId: report.runId,
          status: report.status,
          dryRun: report.dryRun,
          checked: report.checked,
          changed: report.changed,
          failed: report.failed,
          toVersion: report.toVersion,
          durationMs: report.durationMs,
        },
        'refresh finished',
      );
      return report;
    } catch (err) {
      this.logger.warn(
        { state: name, err, durationMs: this.host.clock.now().getTime() - started },
        'refresh failed',
      );
      throw err;
    } finally {
      signal.removeEventListener('abort', abort);
      this.active.delete(local);
    }
  }

  beforeApplicationShutdown(): void {
    for (const run of this.active) run.abort();
  }
}
