import { DiscoveryService } from '@nestjs/core';
import type { RecordedEvent } from '../domain/shared/event';
import type { Queryable } from '../infrastructure/postgres/database';

/**
 * Marks a class as a projector for the ProjectionsModule to find. Nest has no
 * multi-providers (Angular's `multi: true`), so a slice's module lists its
 * projector classes among its providers and the ProjectionsModule collects
 * every provider carrying this mark, the way @nestjs/cqrs collects command
 * handlers: a slice adds a read model without any other module naming it.
 */
export const Projector = DiscoveryService.createDecorator<void>();

/**
 * Turns events into read-model rows. `apply` runs inside the transaction that
 * also advances the projector's checkpoint, so a batch lands whole or not at
 * all; it must be idempotent per event (a redelivered batch changes nothing).
 *
 * A rebuild runs the same projector against copies of its tables while the
 * live projection goes on (shadow-tables.ts): so its SQL names its tables
 * unqualified (the transaction's search_path picks live or copy), and
 * anything it keeps in memory is only a cache checked against its own rows,
 * since `apply` may run for both at once.
 *
 * A few events of a command may be applied by several projectors at once in
 * one shared transaction (ProjectionRunner.together): `apply` touches only
 * its own tables and no session state (settings, named savepoints) for such
 * batches (at most 50 events).
 */
export interface Projector {
  /** Checkpoint key; renaming it replays the whole log into this projector. */
  readonly name: string;
  readonly handles: readonly string[];
  /** Tables this projector owns: a rebuild fills copies of them and swaps those in. */
  readonly tables: readonly string[];
  /**
   * Tables of other projectors that queries over this one's join (a
   * resource's state), whose statistics are refreshed with this one's after
   * a big batch: the planner's estimate of the join is only as good as both.
   */
  readonly analyzeWith?: readonly string[];
  apply(events: RecordedEvent[], tx: Queryable): Promise<void>;
  /**
   * Whether these events of its types, of an append still being written,
   * are worth applying before the append commits: the runner then applies
   * them beside it, in a transaction of their own that moves the checkpoint
   * and commits only once the append has committed and its events are the
   * log's next for this projector, and rolls back otherwise (ProjectionRunner,
   * early). Their positions are zero: only a projector whose rows never use
   * an event's position may say yes, and only where it pays (a first commit's
   * COPY, the longest write of its answer).
   */
  applyBeforeCommit?(events: readonly RecordedEvent[]): boolean;
}
