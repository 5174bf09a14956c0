import type { JsonObject } from '../../domain/terraform';
import { Halted, untilHalted, withTimeout } from './async-limits';
import { oneLine } from './one-line';
import { shapeProviderConfig } from './provider-config';
import { groupLabel, ProviderGroup } from './provider-groups';
import type { RefreshProvider } from './provider-opener.port';
import { failure, refreshInstance } from './refresh-instance';
import type { RunContext } from './refresh-run-context';

export interface GroupSettings {
  /** Launches (or hands over one already launching, see ProviderLaunches) a provider process. */
  open: () => Promise<RefreshProvider>;
  /** Provider processes for this group (see `poolSize`), each launched and configured once. */
  processes: number;
  /** Reads in flight on each provider process. */
  parallelism: number;
  /** How long to wait for a process to end before moving on (it is killed regardless). */
  closeTimeoutMs: number;
  /** Called after every failure; fail-fast halts the run from here. */
  onFailure: () => void;
}

/**
 * Refreshes one provider group on a pool of `processes` provider processes:
 * each is launched and configured once, then they take the group's
 * instances from one shared queue, up to `parallelism` reads at once each.
 * A provider process is one core at most, so a big group on one process is
 * bound by it; the pool spreads the reads, and the run context records the
 * results in document order, so nothing downstream can tell the pool size.
 *
 * A process that cannot start or be configured, or that exits before it is
 * closed (a crash), fails the group: the other processes are stopped and
 * every instance without an outcome fails with that reason, as when the one
 * process of a single-process group dies. A halt leaves the instances not yet
 * read without an outcome. Every process is always ended, even one whose
 * launch completes after a halt.
 */
export async function refreshGroup(
  group: ProviderGroup,
  config: JsonObject,
  ctx: RunContext,
  settings: GroupSettings,
): Promise<void> {
  if (ctx.halted) return;
  const label = groupLabel(group);
  const size = Math.max(1, Math.min(settings.processes, group.instances.length));
  const stopGroup = new AbortController();
  const signal = AbortSignal.any([ctx.halt.signal, stopGroup.signal]);
  const members = new Set<RefreshProvider>();
  const stopped: { reason: unknown } = { reason: undefined };
  const failGroup = (reason: unknown): void => {
    if (stopGroup.signal.aborted || ctx.halted) return;
    stopped.reason = reason;
    stopGroup.abort();
    for (const p of members) p.stop().catch(() => undefined);
  };
  const name = (index: number): string =>
    size > 1 ? `provider process ${index + 1} of ${size}` : 'the provider process';

  let next = 0;
  const member = async (index: number): Promise<void> => {
    const opening = settings.open();
    let provider: RefreshProvider;
    try {
      provider = await untilHalted(opening, signal);
    } catch (e) {
      opening
        .then(
          (p) => p.close(),
          () => undefined,
        )
        .catch(() => undefined);
      if (!(e instanceof Halted)) failGroup(e);
      return;
    }
    members.add(provider);
    ctx.open.add(provider);
    void provider.crashed.then((how) =>
      failGroup(new Error(`${name(index)} ${how}; the group's remaining reads were not made`)),
    );
    try {
      // Unlabelled: the group's failure names the provider (`${label}: …`, below).
      const shaped = shapeProviderConfig(provider.schema.provider.block, config, null);
      await untilHalted(provider.configure(shaped), signal);
      const reader = async (): Promise<void> => {
        while (next < group.instances.length && !signal.aborted) {
          const flat = group.instances[next++];
          const outcome = await refreshInstance(provider, flat, signal);
          // null: the run or the group stopped while the read was in flight.
          if (outcome === null) return;
          ctx.record(flat, outcome);
          if (outcome.result.outcome === 'failed') settings.onFailure();
        }
      };
      await Promise.all(Array.from({ length: settings.parallelism }, reader));
    } catch (e) {
      if (!(e instanceof Halted)) failGroup(e);
    } finally {
      members.delete(provider);
      ctx.open.delete(provider);
      if (signal.aborted) await provider.stop().catch(() => undefined);
      await withTimeout(provider.close(), settings.closeTimeoutMs).catch(() => undefined);
    }
  };
  await Promise.all(Array.from({ length: size }, (_, i) => member(i)));

  if (stopGroup.signal.aborted && !ctx.halted) {
    const message = `${label}: ${oneLine(stopped.reason)}`;
    const unread = group.instances.filter((flat) => !ctx.outcomes.has(flat));
    for (const flat of unread) ctx.record(flat, failure(flat, message));
    if (unread.length > 0) settings.onFailure();
  }
}

/**
 * Provider processes for a group of `instances`: the one asked for, else
 * one per CPU less one (kl's own), up to `MAX_DEFAULT_POOL`, and by default
 * never more than one per `MIN_READS_PER_PROCESS` instances, since a launch
 * costs a second or so of CPU and a big provider hundreds of MB.
 *
 * One CPU is left to kl because kl itself is one busy thread for the whole
 * read loop (it encodes, decodes, hashes and compares every read): on 2 CPUs,
 * with kld and PostgreSQL on the same machine, 5,000 reads took 2.48 s on one
 * provider process and 2.67 s on two, which only took CPU from kl
 * (docs/performance-history.md, "Refresh (wave 9)").
 */
export function poolSize(instances: number, asked: number | undefined, cpuCount: number): number {
  if (asked !== undefined) return Math.max(1, Math.min(asked, instances));
  const byWork = Math.ceil(instances / MIN_READS_PER_PROCESS);
  return Math.max(1, Math.min(cpuCount - 1, MAX_DEFAULT_POOL, byWork));
}

export const MAX_DEFAULT_POOL = 4;
export const MIN_READS_PER_PROCESS = 250;
