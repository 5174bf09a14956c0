import type { PlannedChange } from '../apply/plan-json';

export interface PlanResourceDelta {
  creates: number;
  deletes: number;
  imports: number;
  /** creates + imports − deletes (a forget removes from the state too); replacements are neutral. */
  delta: number;
}

/**
 * How a plan changes the number of resources a quota counts (see
 * `isCountedAddress`): managed, non-deposed instance objects. A replacement
 * destroys one and creates one; a deposed object's removal was never counted.
 */
export function planResourceDelta(changes: readonly PlannedChange[]): PlanResourceDelta {
  let creates = 0;
  let deletes = 0;
  let imports = 0;
  for (const c of changes) {
    if (c.mode !== 'managed' || c.address !== c.instance) continue;
    if (c.kind === 'create') creates++;
    else if (c.kind === 'delete' || c.kind === 'forget') deletes++;
    else if (c.importing && (c.kind === 'no-op' || c.kind === 'update')) imports++;
  }
  return { creates, deletes, imports, delta: creates + imports - deletes };
}
