export const REFRESH_STATE_LOOKUP = Symbol('RefreshStateLookup');

export interface CurrentStateVersion {
  stateId: string;
  version: number;
  serial: number;
}

/** What starting a run reads about the state: its current committed version. */
export interface RefreshStateLookup {
  /** null when the state does not exist, is deleted, or has no committed version. */
  currentVersion(name: string): Promise<CurrentStateVersion | null>;
}
