import type { Database } from '../../infrastructure/postgres/database';
import type { Projector } from '../projector';
import { ProviderConfigsProjector } from './provider-configs.projector';
import { RefreshRunsProjector } from './refresh-runs.projector';

export { ProviderConfigsProjector, RefreshRunsProjector };

/**
 * Read models of refresh runs and provider configs. They never read the
 * State aggregate's tables: the drift view joins them at query time.
 */
export function refreshProjectors(_db: Database): Projector[] {
  return [new RefreshRunsProjector(), new ProviderConfigsProjector()];
}
