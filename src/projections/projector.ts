import type { RecordedEvent } from '../domain/shared/event';
import type { Queryable } from '../infrastructure/postgres/database';

export const PROJECTORS = Symbol('Projectors');

/**
 * Turns events into read-model rows. `apply` runs inside the transaction that
 * also advances the projector's checkpoint, so a batch lands whole or not at
 * all; it must be idempotent per event (a redelivered batch changes nothing).
 */
export interface Projector {
  /** Checkpoint key; renaming it replays the whole log into this projector. */
  readonly name: string;
  readonly handles: readonly string[];
  /** Tables this projector owns, emptied by a rebuild. */
  readonly tables: readonly string[];
  apply(events: RecordedEvent[], tx: Queryable): Promise<void>;
}
