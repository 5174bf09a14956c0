import type { LRUCache } from 'lru-cache';
import { boundedCache } from '../../application/bounded-cache';
import type { StateDocumentMeta } from '../../domain/terraform';
import type { InstanceObjectV4, ResourceDescriptor } from '../../domain/terraform';

export interface PlacedInstance {
  resource: ResourceDescriptor;
  instance: InstanceObjectV4;
}

/** A state's current document, taken apart so a delta commit only touches what changed. */
export interface CurrentDocument {
  version: number;
  meta: StateDocumentMeta;
  /** address → instance */
  instances: Map<string, PlacedInstance>;
  /** Ids of the chunks `raw_state_chunks` holds for this version; null before the first write. */
  chunks: string[] | null;
}

/**
 * Least-recently-used documents, bounded by the number of instances held
 * rather than of states (CacheBudgets `documentInstances`).
 */
export class DocumentCache {
  private readonly entries: LRUCache<string, CurrentDocument>;
  /** The states pushed out by the last `put` (only a `put` pushes any out). */
  private evicted: string[] = [];

  constructor(maxInstances: number) {
    this.entries = boundedCache<CurrentDocument>(
      maxInstances,
      (doc) => doc.instances.size,
      (stateId) => this.evicted.push(stateId),
    );
  }

  /**
   * Removes and returns the entry: the caller mutates it while applying a
   * commit and puts it back only once that succeeded, so a failure midway
   * never leaves a half-applied document behind.
   */
  take(stateId: string): CurrentDocument | undefined {
    const doc = this.entries.get(stateId);
    if (doc) this.entries.delete(stateId);
    return doc;
  }

  /**
   * Keeps `doc` as `stateId`'s document. Returns the states no longer kept
   * because of it: those pushed out to make room, and `stateId` itself when
   * its document alone is over the budget.
   */
  put(stateId: string, doc: CurrentDocument): string[] {
    this.evicted = [];
    this.entries.set(stateId, doc);
    const dropped = this.evicted;
    if (!this.entries.has(stateId)) dropped.push(stateId);
    return dropped;
  }

  remove(stateId: string): void {
    this.entries.delete(stateId);
  }
}
