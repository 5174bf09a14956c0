import type { SchemaBlock } from '../../domain/cty/schema';

export const REFRESH_STATE_LOOKUP = Symbol('RefreshStateLookup');

export interface CurrentStateVersion {
  stateId: string;
  version: number;
  serial: number;
}

/** What starting a run or storing a provider config reads about the state. */
export interface RefreshStateLookup {
  /** null when the state does not exist, is deleted, or has no committed version. */
  currentVersion(name: string): Promise<CurrentStateVersion | null>;
  /** True for a live state, committed version or not. */
  stateExists(name: string): Promise<boolean>;
  /** Those of `addresses` that name no instance of the state's `version`. */
  addressesNotIn(stateId: string, version: number, addresses: string[]): Promise<string[]>;
}

export const PROVIDER_BLOCK_SCHEMAS = Symbol('ProviderBlockSchemas');

/** The provider block schemas refresh has cached, to check a config against before storing it. */
export interface ProviderBlockSchemas {
  /** One per cached version of `source` (normalised), newest first; empty when none is known. */
  providerBlocks(source: string): Promise<{ version: string; block: SchemaBlock }[]>;
}
