import type { Provider, Type } from '@nestjs/common';
import type { Database } from '../infrastructure/postgres/database';
import type { Projector } from '../projections/projector';

/** A vertical slice: its HTTP controllers, its providers and its projectors. */
export interface Feature {
  controllers: Type<unknown>[];
  providers: Provider[];
  projectors(db: Database): Projector[];
}

export const stateFeature: Feature = {
  controllers: [],
  providers: [],
  projectors: () => [],
};
