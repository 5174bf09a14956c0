import type { JsonObject } from '../../domain/terraform';
import { forEachBounded, Halted, untilHalted, withTimeout } from './async-limits';
import { oneLine } from './one-line';
import { shapeProviderConfig } from './provider-config';
import { groupLabel, ProviderGroup } from './provider-groups';
import type { ProviderOpener, RefreshProvider } from './provider-opener.port';
import { failure, refreshInstance } from './refresh-instance';
import type { RunContext } from './refresh-run-context';

export interface GroupSettings {
  opener: ProviderOpener;
  searchPaths: readonly string[];
  /** Reads in flight on the one provider process. */
  parallelism: number;
  /** How long to wait for the process to end before moving on (it is killed regardless). */
  closeTimeoutMs: number;
  /** Called after every failure; fail-fast halts the run from here. */
  onFailure: () => void;
}

/**
 * Refreshes one provider group on one provider process: launch, configure,
 * then up to `parallelism` reads at once. A group that cannot start or be
 * configured fails each of its instances with that reason; a halt leaves
 * the instances not yet read without an outcome. The process is always
 * ended, even when its launch completes after a halt.
 */
export async function refreshGroup(
  group: ProviderGroup,
  config: JsonObject,
  ctx: RunContext,
  settings: GroupSettings,
): Promise<void> {
  if (ctx.halted) return;
  const label = groupLabel(group);
  // Every instance without an outcome yet fails with the group's error.
  const failGroup = (e: unknown): void => {
    if (ctx.halted) return;
    const message = `${label}: ${oneLine(e)}`;
    for (const flat of group.instances) {
      if (!ctx.outcomes.has(flat)) ctx.record(flat, failure(flat, message));
    }
    settings.onFailure();
  };

  const opening = settings.opener.open(group.source, { searchPaths: settings.searchPaths });
  let provider: RefreshProvider;
  try {
    provider = await untilHalted(opening, ctx.halt.signal);
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
  ctx.open.add(provider);
  try {
    const shaped = shapeProviderConfig(provider.schema.provider.block, config, label);
    await untilHalted(provider.configure(shaped), ctx.halt.signal);
    let stop = false;
    await forEachBounded(group.instances, settings.parallelism, async (flat) => {
      if (stop || ctx.halted) return;
      const outcome = await refreshInstance(provider, flat, ctx.halt.signal);
      if (outcome === null) {
        stop = true;
        return;
      }
      ctx.record(flat, outcome);
      if (outcome.result.outcome === 'failed') settings.onFailure();
    });
  } catch (e) {
    if (!(e instanceof Halted)) failGroup(e);
  } finally {
    ctx.open.delete(provider);
    if (ctx.halted) await provider.stop().catch(() => undefined);
    await withTimeout(provider.close(), settings.closeTimeoutMs).catch(() => undefined);
  }
}
