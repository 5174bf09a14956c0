import type { Database } from '../infrastructure/postgres/database';
import type { Projector } from '../projections/projector';
import { queryFeature } from './query.feature';
import { refreshFeature } from './refresh.feature';
import { Feature, stateFeature } from './state.feature';

// Nest matches routes in registration order: the refresh feature's
// POST /v1/states/<name>/refresh must come before the backend's POST.
export const FEATURES: Feature[] = [refreshFeature, stateFeature, queryFeature];

export function allProjectors(db: Database): Projector[] {
  return FEATURES.flatMap((f) => f.projectors(db));
}
