import type { Projector } from '../projector';
import { ApplyRunsProjector } from './apply-runs.projector';

export { ApplyRunsProjector };

/** Read models of apply runs (resource_reservations belongs to the State aggregate's). */
export const APPLY_PROJECTORS = [ApplyRunsProjector] as const;

/** New instances, for a runner built outside Nest (tests). */
export function applyProjectors(): Projector[] {
  return APPLY_PROJECTORS.map((P) => new P());
}
