import { REFRESH_STATE_CHANGED, RefreshRunStatus } from '../../domain/refresh';
import { DomainError } from '../../domain/shared/domain-error';
import type { LockInfo } from '../../domain/state';
import {
  FlatInstance,
  flattenInstances,
  InstanceHasher,
  JsonObject,
  parseStateDocument,
  StateDocumentV4,
} from '../../domain/terraform';
import { atLeastOne, forEachBounded } from './async-limits';
import { oneLine } from './one-line';
import { EnvPolicy, resolveEnvReferences } from './provider-config';
import {
  groupByProvider,
  groupLabel,
  isBuiltInProvider,
  ProviderConfigRef,
  ProviderGroup,
  providerCensus,
} from './provider-groups';
import type { ProviderOpener } from './provider-opener.port';
import type { StartedRun } from './refresh-commands';
import { RefreshError } from './refresh-error';
import { poolSize, refreshGroup } from './refresh-group';
import { ProviderLaunches } from './provider-launches';
import type { RefreshHost } from './refresh-host';
import { skipped } from './refresh-instance';
import { refreshedDocument, summarise } from './refresh-outcome';
import { RefreshOptions, RefreshReport } from './refresh-report';
import { RunContext } from './refresh-run-context';
import { SecretMask } from './secret-mask';
import type { FinishRefreshRun, RefreshServerPort } from './refresh-server.port';

const skipInstanceHash: InstanceHasher = () => '';

/** What the run knows once the document is in: see `RefreshOrchestrator.prepare`. */
interface PreparedRun {
  doc: StateDocumentV4;
  flat: FlatInstance[];
  builtIn: ProviderGroup[];
  groups: ProviderGroup[];
  configs: Map<string, JsonObject>;
}

export interface RefreshOrchestratorSettings {
  /** Which names `{"env": …}` may read; default any (the operator's own machine). */
  envPolicy?: EnvPolicy;
  /**
   * Results are sent to the server in batches of this size. Each batch is one
   * request, one command and one transaction on kld: 1,000 rather than 200
   * took a fifth of those fixed costs off a 5,000-instance refresh, and a
   * batch of 1,000 results is about 250 KB of JSON.
   */
  batchSize?: number;
  /** How long to wait for a provider process to end before moving on (it is killed regardless). */
  closeTimeoutMs?: number;
  /** Written into the LockInfo's Version. */
  clientVersion?: string;
}

/**
 * Refreshes every managed instance of a state through its provider (ADR
 * 0005/0006): a pool of provider processes per provider configuration (one
 * for a small group, see `poolSize`), groups in parallel up to
 * `concurrency`, and up to `parallelism` reads in flight on each process, as
 * terraform does on its one. Results are recorded in document order, so the
 * run records the same events whatever the pool size. The refreshed
 * document is committed only when nothing failed and it is not a dry run; a
 * partly refreshed state would claim a freshness it does not have.
 */
export class RefreshOrchestrator {
  private readonly envPolicy: EnvPolicy | undefined;
  private readonly batchSize: number;
  private readonly closeTimeoutMs: number;
  private readonly clientVersion: string;

  constructor(
    private readonly server: RefreshServerPort,
    private readonly opener: ProviderOpener,
    private readonly host: RefreshHost,
    settings: RefreshOrchestratorSettings = {},
  ) {
    this.envPolicy = settings.envPolicy;
    this.batchSize = settings.batchSize ?? 1_000;
    this.closeTimeoutMs = settings.closeTimeoutMs ?? 2_500;
    this.clientVersion = settings.clientVersion ?? 'kilolock';
  }

  async run(
    stateName: string,
    options: RefreshOptions,
    signal: AbortSignal,
  ): Promise<RefreshReport> {
    const startedAt = this.host.clock.now().getTime();
    const starting = this.server.startRun({
      state: stateName,
      dryRun: options.dryRun,
      actor: options.actor,
    });
    // The document is asked for beside the run, so it is there when the run is. It is used
    // only once the lock is held, and only if its serial is the run's (`launchEarly`, `prepare`).
    const document = this.server.getState(stateName);
    document.catch(() => undefined); // reported once the lock is held, if the run starts at all
    // The warm-up (a key pair and a certificate, 10-15 ms of CPU) begins a turn of the event
    // loop later, once the requests above are on their way: begun at once, its synchronous
    // part would hold them in this process.
    setImmediate(() => this.opener.warmUp?.());
    const run = await starting;
    const lock: LockInfo = {
      ID: this.host.ids.uuid(),
      Operation: 'OperationTypeRefresh',
      Info: `kl refresh run ${run.runId}`,
      Who: options.actor,
      Version: this.clientVersion,
      Created: this.host.clock.now().toISOString(),
      Path: '',
    };

    const launches = new ProviderLaunches(this.opener, options.providerSearchPaths);
    // Every value the run resolves from the environment, kept out of every text it gives out.
    const mask = new SecretMask();
    let locked = false;
    const warnings: string[] = [];
    try {
      // The providers the document needs are started as soon as it and the run are in
      // (ProviderLaunches), while the lock is asked for: a provider takes longer to start than
      // the lock and the parse take. The document is parsed and its providers' configurations
      // resolved meanwhile.
      const prepared = document.then(async (text) => {
        const early = await this.launchEarly(text, stateName, run, options, signal, launches, mask);
        // The launches reach their spawn before the parse below holds the thread.
        await new Promise<void>((resolve) => setImmediate(resolve));
        return this.prepare(text, stateName, run, early, mask);
      });
      prepared.catch(() => undefined); // reported once the lock is held; not when it is refused
      const outcome = await this.server.lock(stateName, lock);
      if (!outcome.acquired) {
        const h = outcome.holder;
        throw new RefreshError(
          'STATE.LOCKED',
          `state "${stateName}" is locked by ${h.Who || 'someone'} (lock ID ${h.ID}, operation ${h.Operation || 'unknown'}${h.Info ? `, ${h.Info}` : ''})`,
          { holder: h },
        );
      }
      locked = true;
      return await this.refresh(
        await prepared,
        stateName,
        run,
        lock,
        launches,
        options,
        signal,
        startedAt,
        warnings,
        mask,
      );
    } catch (e) {
      await launches.closeUntaken();
      const masked = mask.error(e);
      await this.server
        .finishRun(run.runId, { status: 'failed', errorSummary: oneLine(masked) })
        .catch(() => undefined);
      throw masked;
    } finally {
      await launches.closeUntaken();
      if (locked) {
        try {
          await this.server.unlock(stateName, lock);
        } catch (e) {
          // The outcome stands; the operator needs to know the lock is still held.
          warnings.push(`could not release lock ${lock.ID}: ${oneLine(mask.error(e))}`);
        }
      }
    }
  }

  /** The document, its instances and groups, and every group's config resolved. */
  private async prepare(
    text: string,
    stateName: string,
    run: StartedRun,
    early: Map<string, JsonObject>,
    mask: SecretMask,
  ): Promise<PreparedRun> {
    const doc = parseStateDocument(text);
    if (doc.serial !== run.fromSerial) {
      throw new RefreshError(
        'REFRESH.STATE_CHANGED',
        `state "${stateName}" moved from serial ${run.fromSerial} to ${doc.serial} while the refresh started; run it again`,
      );
    }
    // The refresh never reads an instance's lifecycle hash (kld computes its own when the
    // refreshed document is committed): hashing 5,000 instances here was 3-5 % of kl's CPU.
    const flat = flattenInstances(doc, skipInstanceHash);
    const all = groupByProvider(flat);
    // terraform_data and its kin live inside terraform: no plugin reads them.
    const builtIn = all.filter((g) => isBuiltInProvider(g.source));
    const groups = all.filter((g) => !isBuiltInProvider(g.source));
    const configs = await this.loadConfigs(
      stateName,
      groups.filter((g) => !early.has(g.provider)),
      mask,
      early,
    );
    return { doc, flat, builtIn, groups, configs };
  }

  /**
   * Resolves the configurations of the providers `providerCensus` finds (without the lossless
   * parse), then starts the pools of the groups the run refreshes first (up to the
   * concurrency): a missing or refused variable stops the run before any provider starts.
   * Nothing is started for a document the run will refuse (another serial) or one the census
   * cannot read. Answers the configurations it resolved, by provider configuration address.
   */
  private async launchEarly(
    text: string,
    stateName: string,
    run: StartedRun,
    options: RefreshOptions,
    signal: AbortSignal,
    launches: ProviderLaunches,
    mask: SecretMask,
  ): Promise<Map<string, JsonObject>> {
    const census = providerCensus(text);
    if (!census || census.serial !== run.fromSerial) return new Map();
    const plugins = census.counts.filter((c) => !isBuiltInProvider(c.source));
    const configs = await this.loadConfigs(stateName, plugins, mask);
    if (!signal.aborted) {
      for (const count of plugins.slice(0, this.concurrency(options))) {
        launches.start(count, this.processes(count.instances, options));
      }
    }
    return configs;
  }

  private concurrency(options: RefreshOptions): number {
    return atLeastOne(options.concurrency ?? this.host.cpuCount);
  }

  private processes(instances: number, options: RefreshOptions): number {
    return poolSize(
      instances,
      options.pool === undefined ? undefined : atLeastOne(options.pool),
      this.host.cpuCount,
    );
  }

  private async refresh(
    { doc, flat, builtIn, groups, configs }: PreparedRun,
    stateName: string,
    run: StartedRun,
    lock: LockInfo,
    launches: ProviderLaunches,
    options: RefreshOptions,
    signal: AbortSignal,
    startedAt: number,
    warnings: string[],
    mask: SecretMask,
  ): Promise<RefreshReport> {
    const managed = flat.filter((f) => f.resource.mode === 'managed');
    const ctx = new RunContext(this.server, {
      runId: run.runId,
      instances: managed,
      batchSize: this.batchSize,
      onProgress: options.onProgress,
      mask,
    });

    const halt = (): void => ctx.stopAll();
    if (signal.aborted) halt();
    signal.addEventListener('abort', halt, { once: true });
    let failedFast = false;
    try {
      options.onProgress?.({ done: 0, total: ctx.total });
      for (const flat of builtIn.flatMap((g) => g.instances)) ctx.record(flat, skipped(flat));
      await forEachBounded(groups, this.concurrency(options), async (group) => {
        await refreshGroup(group, configs.get(group.provider) ?? {}, ctx, {
          open: () => launches.take(group),
          processes: this.processes(group.instances.length, options),
          parallelism: atLeastOne(options.parallelism ?? 10),
          closeTimeoutMs: this.closeTimeoutMs,
          onFailure: () => {
            if (options.failFast && !ctx.halted) {
              failedFast = true;
              halt();
            }
          },
        });
      });
      // A halt can leave a group unstarted; its early processes end here, before the finish.
      await launches.closeUntaken();
    } finally {
      signal.removeEventListener('abort', halt);
    }
    await ctx.drain();

    const counts = summarise(ctx);
    const cancelled = signal.aborted;
    const status: RefreshRunStatus = cancelled
      ? 'cancelled'
      : counts.failed > 0 || failedFast
        ? 'failed'
        : 'succeeded';
    // Nothing read, nothing confirmed: a new version would only bump the serial.
    const commit = status === 'succeeded' && !options.dryRun && counts.checked > 0;
    const finished = await this.finish(run, stateName, {
      status,
      errorSummary: cancelled
        ? 'cancelled'
        : status === 'failed'
          ? `${counts.failed} of ${ctx.total} resource instance(s) failed`
          : undefined,
      document: commit ? refreshedDocument(doc, flat, ctx) : undefined,
      lockId: lock.ID,
    });
    return {
      runId: run.runId,
      state: stateName,
      status,
      dryRun: options.dryRun,
      ...counts,
      fromVersion: run.fromVersion,
      toVersion: commit ? finished.toVersion : null,
      durationMs: this.host.clock.now().getTime() - startedAt,
      warnings,
    };
  }

  /**
   * Each group's config, resolved; those in `known` (resolved already) are not read again.
   * `mask` learns every value resolved.
   */
  private async loadConfigs(
    stateName: string,
    groups: readonly (ProviderConfigRef & { provider: string })[],
    mask: SecretMask,
    known: ReadonlyMap<string, JsonObject> = new Map(),
  ): Promise<Map<string, JsonObject>> {
    const out = new Map<string, JsonObject>(known);
    for (const g of groups) {
      const stored = await this.server.getProviderConfig(stateName, g.source, g.alias);
      out.set(
        g.provider,
        resolveEnvReferences(stored ?? {}, this.host.env, groupLabel(g), {
          policy: this.envPolicy,
          mask,
        }),
      );
    }
    return out;
  }

  private async finish(run: StartedRun, stateName: string, request: FinishRefreshRun) {
    try {
      return await this.server.finishRun(run.runId, request);
    } catch (e) {
      if (e instanceof DomainError && e.code === REFRESH_STATE_CHANGED) {
        throw new RefreshError(
          'REFRESH.STATE_CHANGED',
          `state "${stateName}" changed while the refresh ran; nothing was committed: run the refresh again`,
        );
      }
      throw e;
    }
  }
}
