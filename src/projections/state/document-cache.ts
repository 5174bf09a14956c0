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
}

/**
 * Least-recently-used documents, bounded by the number of instances held
 * rather than of states: one 20,000-instance state weighs as much as a
 * thousand small ones.
 */
export class DocumentCache {
  private readonly entries = new Map<string, CurrentDocument>();
  private held = 0;

  constructor(private readonly maxInstances: number) {}

  /**
   * Removes and returns the entry: the caller mutates it while applying a
   * commit and puts it back only once that succeeded, so a failure midway
   * never leaves a half-applied document behind.
   */
  take(stateId: string): CurrentDocument | undefined {
    const doc = this.entries.get(stateId);
    if (doc) this.remove(stateId);
    return doc;
  }

  put(stateId: string, doc: CurrentDocument): void {
    this.remove(stateId);
    if (doc.instances.size > this.maxInstances) return;
    this.entries.set(stateId, doc);
    this.held += doc.instances.size;
    for (const [id, oldest] of this.entries) {
      if (this.held <= this.maxInstances) break;
      this.entries.delete(id);
      this.held -= oldest.instances.size;
    }
  }

  remove(stateId: string): void {
    const doc = this.entries.get(stateId);
    if (!doc) return;
    this.entries.delete(stateId);
    this.held -= doc.instances.size;
  }
}
