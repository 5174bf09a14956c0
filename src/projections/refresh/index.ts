import type { Projector } from '../projector';
import { ProviderConfigsProjector } from './provider-configs.projector';
import { RefreshRunsProjector } from './refresh-runs.projector';

export { ProviderConfigsProjector, RefreshRunsProjector };

/**
 * Read models of refresh runs and provider configs. They never read the
 * State aggregate's tables: the drift view joins them at query time.
 */
export const REFRESH_PROJECTORS = [RefreshRunsProjector, ProviderConfigsProjector] as const;

/** New instances, for a runner built outside Nest (tests). */
export function refreshProjectors(): Projector[] {
  return REFRESH_PROJECTORS.map((P) => new P());
}
