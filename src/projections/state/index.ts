import type { Database } from '../../infrastructure/postgres/database';
import type { Projector } from '../projector';
import { RawStateProjector } from './raw-state.projector';
import { ResourceLifecyclesProjector } from './resource-lifecycles.projector';
import { StateCatalogProjector } from './state-catalog.projector';

export { RawStateProjector, ResourceLifecyclesProjector, StateCatalogProjector };

/**
 * The State aggregate's read models. Each projector owns its tables and
 * checkpoint and never reads another's tables, so any one can be rebuilt or
 * fall behind alone. `db` is unused for now: every write goes through the
 * batch transaction the runner hands to `apply`.
 */
export function stateProjectors(_db: Database): Projector[] {
  return [new StateCatalogProjector(), new ResourceLifecyclesProjector(), new RawStateProjector()];
}
