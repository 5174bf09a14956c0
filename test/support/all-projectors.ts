import type { EventStore } from '../../src/application/ports/event-store.port';
import { applyProjectors } from '../../src/projections/apply';
import type { Projector } from '../../src/projections/projector';
import { AUTH_PROJECTORS } from '../../src/projections/auth/auth-tokens.projector';
import { QUOTA_PROJECTORS } from '../../src/projections/quota/quotas.projector';
import { refreshProjectors } from '../../src/projections/refresh';
import { stateProjectors } from '../../src/projections/state';

/**
 * Every projector kld registers, for runners built outside Nest
 * (test/integration/modules.int-spec.ts checks that kld registers exactly these).
 */
export function allProjectors(events: EventStore): Projector[] {
  return [
    ...stateProjectors(events),
    ...refreshProjectors(),
    ...applyProjectors(),
    ...AUTH_PROJECTORS.map((P) => new P()),
    ...QUOTA_PROJECTORS.map((P) => new P()),
  ];
}

/** The tables of every read model. */
export function readModelTables(): string[] {
  const reading = new Proxy({} as EventStore, {
    get: () => {
      throw new Error('only the tables are asked for');
    },
  });
  return allProjectors(reading).flatMap((p) => p.tables);
}
