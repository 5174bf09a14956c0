export const SNAPSHOT_STORE = Symbol('SnapshotStore');

export interface Snapshot {
  revision: bigint;
  /** Identifies the shape of `state`; a snapshot of another shape is ignored. */
  schema: string;
  state: unknown;
}

/** A snapshot to write: its state already as JSON text (the writer builds it in slices). */
export interface SnapshotText {
  revision: bigint;
  schema: string;
  json: string;
}

export interface SnapshotStore {
  load(streamId: string): Promise<Snapshot | null>;
  save(streamId: string, snapshot: SnapshotText): Promise<void>;
}
