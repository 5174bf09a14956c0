export const SNAPSHOT_STORE = Symbol('SnapshotStore');

export interface Snapshot {
  revision: bigint;
  /** Identifies the shape of `state`; a snapshot of another shape is ignored. */
  schema: string;
  state: unknown;
}

export interface SnapshotStore {
  load(streamId: string): Promise<Snapshot | null>;
  save(streamId: string, snapshot: Snapshot): Promise<void>;
}
