import type { Database } from '../infrastructure/postgres/database';
import type { Projector } from '../projections/projector';
import { queryFeature } from './query.feature';
import { Feature, stateFeature } from './state.feature';

export const FEATURES: Feature[] = [stateFeature, queryFeature];

export function allProjectors(db: Database): Projector[] {
  return FEATURES.flatMap((f) => f.projectors(db));
}
