import { ProviderSchema } from '../../domain/cty/schema';
import { JsonObject } from '../../domain/terraform';

export const PROVIDER_OPENER = Symbol('ProviderOpener');

/**
 * A resource's state as the provider returned it. `wire` is the provider's
 * own encoding, handed back verbatim on the next call so nothing is lost to a
 * JSON round trip; it is absent for state that came from the document.
 */
export interface ProviderState {
  attributes: JsonObject;
  wire?: Uint8Array;
}

export interface ReadOutcome {
  /** null when the remote object no longer exists. */
  newState: ProviderState | null;
  private: Uint8Array;
}

/**
 * One running provider plugin, as the refresh sees it. Error diagnostics
 * reject with an Error whose message carries their summaries.
 */
export interface RefreshProvider {
  /** Normalised source address and the exact version that was launched. */
  readonly source: string;
  readonly version: string;
  readonly schema: ProviderSchema;

  /** The config must be fully shaped (see `shapeProviderConfig`) and free of env references. */
  configure(config: JsonObject): Promise<void>;
  upgradeResourceState(
    typeName: string,
    version: number,
    attributes: JsonObject,
  ): Promise<ProviderState>;
  readResource(
    typeName: string,
    current: ProviderState,
    privateData: Uint8Array | undefined,
  ): Promise<ReadOutcome>;
  /**
   * Settles, with how it ended (e.g. "exited (code 2, signal null)"), when the
   * process ends before close() was asked for: a crash. Otherwise it never settles.
   */
  readonly crashed: Promise<string>;
  /** Cancels in-flight calls; the process keeps running. */
  stop(): Promise<void>;
  /** Ends the process (idempotent); never leaves it running. */
  close(): Promise<void>;
}

export interface OpenProviderOptions {
  /** `--provider-search-path` values, searched before the defaults. */
  searchPaths: readonly string[];
}

/** Discovers, launches and fetches the schema of a provider (cached where possible). */
export interface ProviderOpener {
  open(source: string, options: OpenProviderOptions): Promise<RefreshProvider>;
  /**
   * Starts, without waiting, the work every launch needs whatever the
   * provider (the plugin client certificate), so it is done while the run's
   * first server calls are in flight rather than on the way to the first read.
   * A failure here is left for `open` to report.
   */
  warmUp?(): void;
}
