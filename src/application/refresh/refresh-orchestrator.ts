import { randomUUID } from 'node:crypto';
import * as os from 'node:os';
import {
  changedPaths,
  driftPaths,
  REFRESH_STATE_CHANGED,
  RefreshResult,
  RefreshRunStatus,
} from '../../domain/refresh';
import { DomainError } from '../../domain/shared/domain-error';
import type { LockInfo } from '../../domain/state';
import {
  buildDocument,
  canonicalHash,
  documentMeta,
  FlatInstance,
  flattenInstances,
  InstanceObjectV4,
  JsonObject,
  parseStateDocument,
  StateDocumentV4,
} from '../../domain/terraform';
import { EnvPolicy, resolveEnvReferences, shapeProviderConfig } from './provider-config';
import { groupByProvider, isBuiltInProvider, ProviderGroup } from './provider-groups';
import { ProviderOpener, ProviderState, RefreshProvider } from './provider-opener.port';
import { RefreshError } from './refresh-error';
import { RefreshOptions, RefreshReport } from './refresh-report';
import { RefreshServerPort } from './refresh-server.port';
import type { StartedRun } from './refresh-commands';

export interface RefreshOrchestratorSettings {
  /** Where `{"env": …}` config values are looked up; default process.env. */
  env?: Readonly<Record<string, string | undefined>>;
  /** Which of those names may be read; default any (the operator's own machine). */
  envPolicy?: EnvPolicy;
  /** Results are sent to the server in batches of this size. */
  batchSize?: number;
  /** How long to wait for a provider process to end before moving on (it is killed regardless). */
  closeTimeoutMs?: number;
  /** Written into the LockInfo's Version. */
  clientVersion?: string;
  newId?: () => string;
}

/** Raised inside a group when the run halts (cancel or fail-fast); never reported as a resource failure. */
class Halted extends Error {}

interface InstanceResult {
  result: RefreshResult;
  /** The refreshed object; null when gone or failed. */
  instance: InstanceObjectV4 | null;
}

/** Mutable bookkeeping of one run, shared by its provider groups. */
class RunContext {
  readonly halt = new AbortController();
  readonly open = new Set<RefreshProvider>();
  readonly outcomes = new Map<FlatInstance, InstanceResult>();
  private pending: RefreshResult[] = [];
  private flushing: Promise<void> = Promise.resolve();
  private flushError: unknown = null;
  done = 0;

  constructor(
    private readonly server: RefreshServerPort,
    readonly runId: string,
    readonly total: number,
    private readonly batchSize: number,
  ) {}

  record(flat: FlatInstance, outcome: InstanceResult): void {
    this.outcomes.set(flat, outcome);
    this.done++;
    this.pending.push(outcome.result);
    if (this.pending.length >= this.batchSize) this.flush();
  }

  /** Batches go out one at a time, in order, while the refresh continues. */
  flush(): void {
    if (this.pending.length === 0) return;
    const batch = this.pending;
    this.pending = [];
    this.flushing = this.flushing.then(async () => {
      if (this.flushError) return;
      try {
        await this.server.recordResults(this.runId, batch);
      } catch (e) {
        this.flushError = e;
      }
    });
  }

  async drain(): Promise<void> {
    this.flush();
    await this.flushing;
    if (this.flushError) throw this.flushError;
  }
}

/**
 * Refreshes every managed instance of a state through its provider (ADR
 * 0005/0006): one provider process per provider configuration, groups in
 * parallel up to `concurrency`, and within a group up to `parallelism` reads
 * in flight on the one process, as terraform does. The refreshed
 * document is committed only when nothing failed and it is not a dry run; a
 * partly refreshed state would claim a freshness it does not have.
 */
export class RefreshOrchestrator {
  private readonly env: Readonly<Record<string, string | undefined>>;
  private readonly envPolicy: EnvPolicy | undefined;
  private readonly batchSize: number;
  private readonly closeTimeoutMs: number;
  private readonly clientVersion: string;
  private readonly newId: () => string;

  constructor(
    private readonly server: RefreshServerPort,
    private readonly opener: ProviderOpener,
    settings: RefreshOrchestratorSettings = {},
  ) {
    this.env = settings.env ?? process.env;
    this.envPolicy = settings.envPolicy;
    this.batchSize = settings.batchSize ?? 200;
    this.closeTimeoutMs = settings.closeTimeoutMs ?? 2_500;
    this.clientVersion = settings.clientVersion ?? 'kilolock';
    this.newId = settings.newId ?? randomUUID;
  }

  async run(
    stateName: string,
    options: RefreshOptions,
    signal: AbortSignal,
  ): Promise<RefreshReport> {
    const startedAt = Date.now();
    const run = await this.server.startRun({
      state: stateName,
      dryRun: options.dryRun,
      actor: options.actor,
    });
    const lock: LockInfo = {
      ID: this.newId(),
      Operation: 'OperationTypeRefresh',
      Info: `kl refresh run ${run.runId}`,
      Who: options.actor,
      Version: this.clientVersion,
      Created: new Date().toISOString(),
      Path: '',
    };

    let locked = false;
    const warnings: string[] = [];
    try {
      const outcome = await this.server.lock(stateName, lock);
      if (!outcome.acquired) {
        const h = outcome.holder;
        throw new RefreshError(
          'REFRESH.LOCKED',
          `state "${stateName}" is locked by ${h.Who || 'someone'} (lock ID ${h.ID}, operation ${h.Operation || 'unknown'}${h.Info ? `, ${h.Info}` : ''})`,
          { holder: h },
        );
      }
      locked = true;
      return await this.refresh(stateName, run, lock, options, signal, startedAt, warnings);
    } catch (e) {
      await this.server
        .finishRun(run.runId, { status: 'failed', errorSummary: oneLine(e) })
        .catch(() => undefined);
      throw e;
    } finally {
      if (locked) {
        try {
          await this.server.unlock(stateName, lock);
        } catch (e) {
          // The outcome stands; the operator needs to know the lock is still held.
          warnings.push(`could not release lock ${lock.ID}: ${oneLine(e)}`);
        }
      }
    }
  }

  private async refresh(
    stateName: string,
    run: StartedRun,
    lock: LockInfo,
    options: RefreshOptions,
    signal: AbortSignal,
    startedAt: number,
    warnings: string[],
  ): Promise<RefreshReport> {
    const doc = parseStateDocument(await this.server.getState(stateName));
    if (doc.serial !== run.fromSerial) {
      throw new RefreshError(
        'REFRESH.STATE_CHANGED',
        `state "${stateName}" moved from serial ${run.fromSerial} to ${doc.serial} while the refresh started; run it again`,
      );
    }
    const flat = flattenInstances(doc);
    const all = groupByProvider(flat);
    // terraform_data and its kin live inside terraform: no plugin reads them.
    const builtIn = all.filter((g) => isBuiltInProvider(g.source));
    const groups = all.filter((g) => !isBuiltInProvider(g.source));
    const configs = await this.loadConfigs(stateName, groups);
    const total = all.reduce((n, g) => n + g.instances.length, 0);
    const ctx = new RunContext(this.server, run.runId, total, this.batchSize);

    // Stop first: in-flight reads return at once and the processes can then be closed.
    const halt = (): void => {
      ctx.halt.abort();
      for (const p of ctx.open) p.stop().catch(() => undefined);
    };
    if (signal.aborted) halt();
    signal.addEventListener('abort', halt, { once: true });
    let failedFast = false;
    try {
      options.onProgress?.({ done: 0, total });
      for (const flat of builtIn.flatMap((g) => g.instances)) {
        this.record(ctx, options, flat, skipped(flat));
      }
      await forEachBounded(groups, concurrencyOf(options), async (group) => {
        await this.refreshGroup(group, configs.get(group.provider) ?? {}, ctx, options, () => {
          if (options.failFast && !ctx.halt.signal.aborted) {
            failedFast = true;
            halt();
          }
        });
      });
    } finally {
      signal.removeEventListener('abort', halt);
    }
    await ctx.drain();

    const report = this.summarise(stateName, run, options, ctx, startedAt, warnings);
    const cancelled = signal.aborted;
    const status: RefreshRunStatus = cancelled
      ? 'cancelled'
      : report.failed > 0 || failedFast
        ? 'failed'
        : 'succeeded';
    // Nothing read, nothing confirmed: a new version would only bump the serial.
    const commit = status === 'succeeded' && !options.dryRun && report.checked > 0;
    const finished = await this.finish(run, stateName, {
      status,
      errorSummary: cancelled
        ? 'cancelled'
        : status === 'failed'
          ? `${report.failed} of ${total} resource instance(s) failed`
          : undefined,
      document: commit ? this.refreshedDocument(doc, flat, ctx) : undefined,
      lockId: lock.ID,
    });
    return {
      ...report,
      status,
      toVersion: commit ? finished.toVersion : null,
      durationMs: Date.now() - startedAt,
    };
  }

  /** Every group's config is resolved before any provider starts: a missing variable stops the run cheaply. */
  private async loadConfigs(
    stateName: string,
    groups: ProviderGroup[],
  ): Promise<Map<string, JsonObject>> {
    const out = new Map<string, JsonObject>();
    for (const g of groups) {
      const stored = await this.server.getProviderConfig(stateName, g.source, g.alias);
      out.set(g.provider, resolveEnvReferences(stored ?? {}, this.env, labelOf(g), this.envPolicy));
    }
    return out;
  }

  private async refreshGroup(
    group: ProviderGroup,
    config: JsonObject,
    ctx: RunContext,
    options: RefreshOptions,
    onFailure: () => void,
  ): Promise<void> {
    if (ctx.halt.signal.aborted) return;
    // Every instance without an outcome yet fails with the group's error.
    const failGroup = (e: unknown): void => {
      if (ctx.halt.signal.aborted) return;
      const message = `${labelOf(group)}: ${oneLine(e)}`;
      for (const flat of group.instances) {
        if (!ctx.outcomes.has(flat)) this.record(ctx, options, flat, failure(flat, message));
      }
      onFailure();
    };

    const opening = this.opener.open(group.source, { searchPaths: options.providerSearchPaths });
    let provider: RefreshProvider;
    try {
      provider = await untilHalted(opening, ctx.halt.signal);
    } catch (e) {
      // A launch that completes after a halt still has to be ended.
      opening
        .then(
          (p) => p.close(),
          () => undefined,
        )
        .catch(() => undefined);
      if (!(e instanceof Halted)) failGroup(e);
      return;
    }
    ctx.open.add(provider);
    try {
      const shaped = shapeProviderConfig(provider.schema.provider.block, config, labelOf(group));
      await untilHalted(provider.configure(shaped), ctx.halt.signal);
      let stop = false;
      await forEachBounded(group.instances, parallelismOf(options), async (flat) => {
        if (stop || ctx.halt.signal.aborted) return;
        const outcome = await this.refreshInstance(provider, flat, ctx.halt.signal);
        if (outcome === null) {
          stop = true;
          return;
        }
        this.record(ctx, options, flat, outcome);
        if (outcome.result.outcome === 'failed') onFailure();
      });
    } catch (e) {
      if (!(e instanceof Halted)) failGroup(e);
    } finally {
      ctx.open.delete(provider);
      if (ctx.halt.signal.aborted) await provider.stop().catch(() => undefined);
      await withTimeout(provider.close(), this.closeTimeoutMs).catch(() => undefined);
    }
  }

  /** null when the run halted while this instance was in flight: it has no outcome. */
  private async refreshInstance(
    provider: RefreshProvider,
    flat: FlatInstance,
    halt: AbortSignal,
  ): Promise<InstanceResult | null> {
    const { instance, resource } = flat;
    const before = instance.attributes;
    if (!before) {
      return failure(flat, 'has no JSON attributes (pre-0.12 flatmap state is not supported)');
    }
    const schema = provider.schema.resourceSchemas[resource.type];
    if (!schema) {
      return failure(
        flat,
        `${provider.source} ${provider.version} has no resource type ${resource.type}`,
      );
    }
    if (instance.schema_version > schema.version) {
      return failure(
        flat,
        `was written with schema version ${instance.schema_version} by a newer provider; ${provider.source} ${provider.version} has version ${schema.version}`,
      );
    }
    try {
      let current: ProviderState = { attributes: before };
      if (instance.schema_version < schema.version) {
        current = await untilHalted(
          provider.upgradeResourceState(resource.type, instance.schema_version, before),
          halt,
        );
      }
      const read = await untilHalted(
        provider.readResource(resource.type, current, decodePrivate(instance.private)),
        halt,
      );
      const beforeHash = canonicalHash(before);
      const base = { address: flat.address, provider: resource.provider, beforeHash };
      if (read.newState === null) {
        return {
          result: { ...base, outcome: 'gone', afterHash: null, changedPaths: [] },
          instance: null,
        };
      }
      const after = read.newState.attributes;
      const afterHash = canonicalHash(after);
      const refreshed: InstanceObjectV4 = {
        ...instance,
        schema_version: schema.version,
        attributes: after,
      };
      delete refreshed.private;
      if (read.private.length > 0) refreshed.private = Buffer.from(read.private).toString('base64');
      // The read is stored either way, so a plan -refresh=false sees what a live plan sees.
      const drift = afterHash === beforeHash ? [] : driftPaths(before, after);
      const outcome =
        afterHash === beforeHash ? 'unchanged' : drift.length > 0 ? 'drifted' : 'normalized';
      return {
        result: {
          ...base,
          outcome,
          afterHash,
          changedPaths: outcome === 'normalized' ? changedPaths(before, after) : drift,
        },
        instance: refreshed,
      };
    } catch (e) {
      // An error caused by our own Stop is the halt, not this resource's failure.
      if (e instanceof Halted || halt.aborted) return null;
      return failure(flat, oneLine(e));
    }
  }

  private record(
    ctx: RunContext,
    options: RefreshOptions,
    flat: FlatInstance,
    outcome: InstanceResult,
  ): void {
    ctx.record(flat, outcome);
    options.onProgress?.({
      done: ctx.done,
      total: ctx.total,
      address: flat.address,
      outcome: outcome.result.outcome,
    });
  }

  /** Same lineage, next serial; gone objects dropped, as terraform's refresh does. */
  private refreshedDocument(
    doc: StateDocumentV4,
    flat: FlatInstance[],
    ctx: RunContext,
  ): StateDocumentV4 {
    const meta = documentMeta(doc);
    const placed: Pick<FlatInstance, 'resource' | 'instance'>[] = [];
    for (const f of flat) {
      const outcome = ctx.outcomes.get(f);
      if (!outcome) placed.push(f);
      else if (outcome.instance) placed.push({ resource: f.resource, instance: outcome.instance });
    }
    return buildDocument({ ...meta, serial: meta.serial + 1 }, placed);
  }

  private async finish(
    run: StartedRun,
    stateName: string,
    request: Parameters<RefreshServerPort['finishRun']>[1],
  ) {
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

  private summarise(
    stateName: string,
    run: StartedRun,
    options: RefreshOptions,
    ctx: RunContext,
    startedAt: number,
    warnings: string[],
  ): RefreshReport {
    const results = [...ctx.outcomes.values()].map((o) => o.result);
    const of = (outcome: RefreshResult['outcome']) => results.filter((r) => r.outcome === outcome);
    const sortedAddresses = (rs: RefreshResult[]) => rs.map((r) => r.address).sort();
    const drifted = sortedAddresses(of('drifted'));
    const normalized = sortedAddresses(of('normalized'));
    const gone = sortedAddresses(of('gone'));
    const skippedCount = of('skipped').length;
    const failures = of('failed')
      .map((r) => ({ address: r.address, message: r.error ?? 'failed' }))
      .sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
    return {
      runId: run.runId,
      state: stateName,
      status: 'succeeded',
      dryRun: options.dryRun,
      checked: results.length - skippedCount,
      changed: drifted.length,
      normalized: normalized.length,
      gone: gone.length,
      failed: failures.length,
      skipped: skippedCount,
      drifted,
      normalizedAddresses: normalized,
      goneAddresses: gone,
      failures,
      fromVersion: run.fromVersion,
      toVersion: null,
      durationMs: Date.now() - startedAt,
      warnings,
    };
  }
}

function failure(flat: FlatInstance, message: string): InstanceResult {
  return {
    result: {
      address: flat.address,
      provider: flat.resource.provider,
      outcome: 'failed',
      beforeHash: flat.instance.attributes ? canonicalHash(flat.instance.attributes) : '',
      afterHash: null,
      changedPaths: [],
      error: message,
    },
    instance: null,
  };
}

function skipped(flat: FlatInstance): InstanceResult {
  const hash = flat.instance.attributes ? canonicalHash(flat.instance.attributes) : '';
  return {
    result: {
      address: flat.address,
      provider: flat.resource.provider,
      outcome: 'skipped',
      beforeHash: hash,
      afterHash: hash,
      changedPaths: [],
    },
    // Stays in the refreshed document exactly as recorded.
    instance: flat.instance,
  };
}

function labelOf(group: ProviderGroup): string {
  return group.alias
    ? `provider ${group.source} (alias ${group.alias})`
    : `provider ${group.source}`;
}

function parallelismOf(options: RefreshOptions): number {
  const n = options.parallelism ?? 10;
  return Number.isInteger(n) && n > 0 ? n : 1;
}

function concurrencyOf(options: RefreshOptions): number {
  const n = options.concurrency ?? os.cpus().length;
  return Number.isInteger(n) && n > 0 ? n : 1;
}

function decodePrivate(text: string | undefined): Uint8Array | undefined {
  return text ? new Uint8Array(Buffer.from(text, 'base64')) : undefined;
}

/** The first non-empty line: plugin errors can carry whole stack traces. */
export function oneLine(e: unknown): string {
  const text = e instanceof Error ? e.message : String(e);
  return (
    text
      .split('\n')
      .find((l) => l.trim() !== '')
      ?.trim() ?? 'failed'
  );
}

/** Settles with the promise, or rejects with Halted as soon as the signal aborts. */
function untilHalted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    promise.catch(() => undefined);
    return Promise.reject(new Halted());
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(new Halted());
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

function withTimeout(promise: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Runs `fn` over the items with at most `limit` in flight; `fn` reports its own failures. */
async function forEachBounded<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) await fn(items[next++]);
  };
  const settled = await Promise.allSettled(
    Array.from({ length: Math.min(limit, items.length) }, worker),
  );
  const rejected = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (rejected) throw rejected.reason;
}
