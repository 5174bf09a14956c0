import {
  OpenProviderOptions,
  ProviderOpener,
  ProviderState,
  ReadOutcome,
  RefreshProvider,
} from '../../application/refresh/provider-opener.port';
import { CtyJson } from '../../domain/cty/cty-type';
import { ProviderSchema } from '../../domain/cty/schema';
import { isJsonObject, JsonObject } from '../../domain/terraform';
import { CachedSchemaProviderFactory } from '../provider/provider-factory';
import { ProviderClient, StateValue } from '../provider/provider-client';

/** The refresh's view of a provider, over `CachedSchemaProviderFactory` (discovery → launch → cached schema). */
export class FactoryProviderOpener implements ProviderOpener {
  constructor(private readonly factory: CachedSchemaProviderFactory) {}

  warmUp(): void {
    this.factory.warmUp();
  }

  async open(source: string, options: OpenProviderOptions): Promise<RefreshProvider> {
    const opened = await this.factory.open(source, { searchPaths: options.searchPaths });
    return new ClientRefreshProvider(
      opened.client,
      opened.provider.source,
      opened.provider.version,
      opened.schema,
    );
  }
}

class ClientRefreshProvider implements RefreshProvider {
  readonly crashed: Promise<string>;
  private closing = false;

  constructor(
    private readonly client: ProviderClient,
    readonly source: string,
    readonly version: string,
    readonly schema: ProviderSchema,
  ) {
    this.crashed = new Promise((resolve) => {
      void client.exited.then(({ code, signal }) => {
        if (!this.closing) resolve(`exited (code ${code}, signal ${signal})`);
      });
    });
  }

  async configure(config: JsonObject): Promise<void> {
    await this.client.configure(config as CtyJson);
  }

  async upgradeResourceState(
    typeName: string,
    version: number,
    attributes: JsonObject,
  ): Promise<ProviderState> {
    const { state } = await this.client.upgradeResourceState({
      typeName,
      version,
      rawState: attributes as CtyJson,
    });
    return toProviderState(state, `UpgradeResourceState(${typeName})`);
  }

  async readResource(
    typeName: string,
    current: ProviderState,
    privateData: Uint8Array | undefined,
  ): Promise<ReadOutcome> {
    const currentState: StateValue | CtyJson = current.wire
      ? { value: current.attributes as CtyJson, msgpack: current.wire }
      : (current.attributes as CtyJson);
    const read = await this.client.readResource({ typeName, currentState, private: privateData });
    if (read.deferred) {
      // We never announce deferral support, so a deferred read is a provider bug.
      throw new Error(`ReadResource(${typeName}) was deferred (${read.deferred})`);
    }
    return {
      newState:
        read.newState.value === null
          ? null
          : toProviderState(read.newState, `ReadResource(${typeName})`),
      private: read.private,
    };
  }

  stop(): Promise<void> {
    return this.client.stop();
  }

  close(): Promise<void> {
    this.closing = true;
    return this.client.close();
  }
}

function toProviderState(state: StateValue, operation: string): ProviderState {
  if (!isJsonObject(state.value)) {
    throw new Error(
      `${operation} returned ${state.value === null ? 'null' : 'a non-object'} state`,
    );
  }
  return { attributes: state.value as JsonObject, wire: state.msgpack };
}
