import type { Database } from '../infrastructure/postgres/database';
import type { Projector } from '../projections/projector';
import { Feature, stateFeature } from './state.feature';

export const FEATURES: Feature[] = [stateFeature];

export function allProjectors(db: Database): Projector[] {
  return FEATURES.flatMap((f) => f.projectors(db));
}
