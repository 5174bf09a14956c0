import type { EventStore } from '../../application/ports/event-store.port';
import type { ReadModelSync } from '../../application/ports/read-model-sync.port';
import { StateEventType } from '../../domain/state';
import type { LogPosition } from '../../domain/shared/event';
import type { Projector } from '../projector';
import type { WrittenChunks } from '../../application/state/written-chunks';
import { RawStateProjector } from './raw-state.projector';
import { ReservationsProjector } from './reservations.projector';
import { ResourceEdgesProjector } from './resource-edges.projector';
import {
  RESOURCE_LIFECYCLES_PROJECTOR,
  ResourceLifecyclesProjector,
} from './resource-lifecycles.projector';
import { STATE_CATALOG_PROJECTOR, StateCatalogProjector } from './state-catalog.projector';

export {
  RawStateProjector,
  ReservationsProjector,
  ResourceEdgesProjector,
  ResourceLifecyclesProjector,
  StateCatalogProjector,
};

/**
 * The State aggregate's read models. Each projector owns its tables and
 * checkpoint and never reads another's tables, so any one can be rebuilt or
 * fall behind alone. The lifecycles come first: a writer's catch-up starts
 * its projectors applying in this order (ProjectionRunner), and theirs is
 * the longest write of a big commit.
 */
export const STATE_PROJECTORS = [
  ResourceLifecyclesProjector,
  StateCatalogProjector,
  ResourceEdgesProjector,
  RawStateProjector,
  ReservationsProjector,
] as const;

/** New instances, for a runner built outside Nest (tests); `written` as kld shares it with its read model. */
export function stateProjectors(events: EventStore, written?: WrittenChunks): Projector[] {
  return [
    new ResourceLifecyclesProjector(),
    new StateCatalogProjector(),
    new ResourceEdgesProjector(),
    new RawStateProjector(events, undefined, undefined, written),
    new ReservationsProjector(),
  ];
}

/**
 * The projections past versions are read from (StateDocumentReadModel's
 * VersionProjections), with the wait for the lifecycles: for the projectors
 * that write them only, as a command waits for those its events feed.
 */
export function versionProjections(sync: ReadModelSync): {
  versions: string;
  lifecycles: string;
  reach(position: LogPosition): Promise<void>;
} {
  return {
    versions: STATE_CATALOG_PROJECTOR,
    lifecycles: RESOURCE_LIFECYCLES_PROJECTOR,
    reach: (position) =>
      sync.waitForPosition(position, [
        StateEventType.LifecycleOpened,
        StateEventType.LifecycleClosed,
      ]),
  };
}
