import type { Projector } from '../../src/projections/projector';
import { refreshProjectors } from '../../src/projections/refresh';
import { stateProjectors } from '../../src/projections/state';

/**
 * Every projector kld registers, for runners built outside Nest
 * (test/integration/modules.int-spec.ts checks that kld registers exactly these).
 */
export function allProjectors(): Projector[] {
  return [...stateProjectors(), ...refreshProjectors()];
}
