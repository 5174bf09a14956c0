import { Decider } from '../shared/decider';
import { DomainError } from '../shared/domain-error';
import { keyProblem, textProblem } from '../shared/storable-text';
import { CommandContext, DomainEvent, EventMetadata } from '../shared/event';
import { changedPaths } from '../terraform/changed-paths';
import { canonicalJson } from '../terraform/canonical-json';
import { isJsonObject, JsonObject } from '../terraform/json-value';
import { envReferences } from './env-reference';
import { PROVIDER_CONFIG_INVALID, PROVIDER_CONFIG_NOT_FOUND } from './refresh.errors';

/**
 * The configuration refresh passes to a provider's Configure, per state and
 * provider (source + alias; alias null is the default configuration). Values
 * are stored exactly as given: secrets belong in environment variables and
 * are written as `{"env": "NAME"}` references, resolved by whoever runs the
 * provider, never by the server.
 */
export const ProviderConfigEventType = {
  ProviderConfigured: 'ProviderConfigured',
  ProviderConfigRemoved: 'ProviderConfigRemoved',
} as const;

export const PROVIDER_CONFIG_EVENT_TYPES: readonly string[] =
  Object.values(ProviderConfigEventType);

/** `source` is always normalised (`registry.terraform.io/hashicorp/aws`). */
export interface ProviderConfigKey {
  state: string;
  source: string;
  alias: string | null;
}

export type ProviderConfigured = DomainEvent<
  'ProviderConfigured',
  ProviderConfigKey & { config: JsonObject }
>;
export type ProviderConfigRemoved = DomainEvent<'ProviderConfigRemoved', ProviderConfigKey>;
export type ProviderConfigEvent = ProviderConfigured | ProviderConfigRemoved;

export function isProviderConfigEvent(event: DomainEvent): event is ProviderConfigEvent {
  return PROVIDER_CONFIG_EVENT_TYPES.includes(event.type);
}

export type ConfigureProvider = {
  type: 'ConfigureProvider';
  data: ProviderConfigKey & { config: JsonObject };
  metadata: CommandContext;
};
export type RemoveProviderConfig = {
  type: 'RemoveProviderConfig';
  data: ProviderConfigKey;
  metadata: CommandContext;
};
export type ProviderConfigCommand = ConfigureProvider | RemoveProviderConfig;

/** Canonical JSON of each stored config, by `source` + alias. */
export interface ProviderConfigs {
  configs: Map<string, string>;
}

const ALIAS = /^[A-Za-z][A-Za-z0-9_-]*$/;
// With the state name (at most 512 bytes), three of them fit one index entry.
const MAX_KEY_PART_BYTES = 512;

function keyOf(k: ProviderConfigKey): string {
  return `${k.source}\u0000${k.alias ?? ''}`;
}

function describe(k: ProviderConfigKey): string {
  return `provider ${k.source}${k.alias === null ? '' : ` (alias ${k.alias})`} of state ${k.state}`;
}

/**
 * Refuses a NUL or a lone surrogate anywhere in a config: the read model (a
 * jsonb column, which refresh reads) would hold U+FFFD instead, so the
 * provider, `kl provider get` and the PUT's own answer would see another value
 * than the one given.
 */
function unstorableText(value: unknown, at: string): void {
  if (typeof value === 'string') {
    const problem = textProblem(value);
    if (problem !== null) {
      throw new DomainError(PROVIDER_CONFIG_INVALID, `config at ${at} ${problem}`);
    }
  } else if (Array.isArray(value)) {
    value.forEach((item, i) => unstorableText(item, `${at}[${i}]`));
  } else if (isJsonObject(value)) {
    for (const [key, item] of Object.entries(value)) {
      const path = at === '' ? key : `${at}.${key}`;
      const problem = textProblem(key);
      if (problem !== null) {
        const shown = `${at === '' ? '' : `${at}.`}${JSON.stringify(key)}`;
        throw new DomainError(PROVIDER_CONFIG_INVALID, `config key ${shown} ${problem}`);
      }
      unstorableText(item, path);
    }
  }
}

function configure(command: ConfigureProvider, state: ProviderConfigs): ProviderConfigEvent[] {
  const { state: name, source, alias, config } = command.data;
  if (alias !== null && !ALIAS.test(alias)) {
    throw new DomainError(PROVIDER_CONFIG_INVALID, `alias "${alias}" is not a provider alias`);
  }
  // Source and alias key the provider_configs table (and its index).
  for (const [what, value] of [
    ['source', source],
    ['alias', alias],
  ] as const) {
    const problem = value === null ? null : keyProblem(value, MAX_KEY_PART_BYTES);
    if (problem !== null) throw new DomainError(PROVIDER_CONFIG_INVALID, `${what} ${problem}`);
  }
  if (!isJsonObject(config)) {
    throw new DomainError(PROVIDER_CONFIG_INVALID, 'a provider config must be a JSON object');
  }
  unstorableText(config, '');
  // A malformed reference would otherwise reach Configure as a literal object.
  envReferences(config);
  // Saving the same config again is not news: the log grows with change only.
  if (state.configs.get(keyOf(command.data)) === canonicalJson(config)) return [];
  return [{ type: 'ProviderConfigured', data: { state: name, source, alias, config } }];
}

function remove(command: RemoveProviderConfig, state: ProviderConfigs): ProviderConfigEvent[] {
  const { state: name, source, alias } = command.data;
  if (!state.configs.has(keyOf(command.data))) {
    throw new DomainError(
      PROVIDER_CONFIG_NOT_FOUND,
      `no config stored for ${describe(command.data)}`,
    );
  }
  return [{ type: 'ProviderConfigRemoved', data: { state: name, source, alias } }];
}

export function decideProviderConfigs(
  command: ProviderConfigCommand,
  state: ProviderConfigs,
): ProviderConfigEvent[] {
  switch (command.type) {
    case 'ConfigureProvider':
      return configure(command, state);
    case 'RemoveProviderConfig':
      return remove(command, state);
    default: {
      const never: never = command;
      throw new Error(`unexpected ${JSON.stringify(never)}`);
    }
  }
}

export function evolveProviderConfigs(
  state: ProviderConfigs,
  event: ProviderConfigEvent,
): ProviderConfigs {
  const configs = new Map(state.configs);
  switch (event.type) {
    case 'ProviderConfigured':
      configs.set(keyOf(event.data), canonicalJson(event.data.config));
      break;
    case 'ProviderConfigRemoved':
      configs.delete(keyOf(event.data));
      break;
    default: {
      const never: never = event;
      throw new Error(`unexpected ${JSON.stringify(never)}`);
    }
  }
  return { configs };
}

export function initialProviderConfigs(): ProviderConfigs {
  return { configs: new Map() };
}

export const PROVIDER_CONFIGS_SNAPSHOT_SCHEMA = 'provider-configs/1';

export function providerConfigsToSnapshot(state: ProviderConfigs): [string, string][] {
  return [...state.configs];
}

export function providerConfigsFromSnapshot(json: unknown): ProviderConfigs {
  if (!Array.isArray(json)) throw new DomainError('SNAPSHOT.INVALID', 'malformed snapshot');
  return { configs: new Map(json as [string, string][]) };
}

export const providerConfigsDecider: Decider<
  ProviderConfigCommand,
  ProviderConfigs,
  ProviderConfigEvent
> = {
  decide: decideProviderConfigs,
  evolve: evolveProviderConfigs,
  initialState: initialProviderConfigs,
};

/** One change to one stored config, as `kl provider get` shows it. */
export interface ProviderConfigChange {
  at: string;
  actor: string;
  action: 'configured' | 'removed';
  source: string;
  alias: string | null;
  /** The config after the change (env references as stored); null once removed. */
  config: JsonObject | null;
  /** Key paths that differ from the config stored before (all of it for the first). */
  changedPaths: string[];
}

/**
 * The history of a state's provider configs, oldest first, from its
 * `provider-configs-<state>` stream: who set or removed what, and when.
 * Only the configs matching `key` when given (alias null = the default).
 */
export function providerConfigHistory(
  events: readonly (ProviderConfigEvent & { metadata: EventMetadata })[],
  key?: Pick<ProviderConfigKey, 'source' | 'alias'>,
): ProviderConfigChange[] {
  const current = new Map<string, JsonObject>();
  const out: ProviderConfigChange[] = [];
  for (const event of events) {
    const k = keyOf(event.data);
    const before = current.get(k) ?? {};
    const after = event.type === 'ProviderConfigured' ? event.data.config : null;
    if (after) current.set(k, after);
    else current.delete(k);
    if (key && (event.data.source !== key.source || event.data.alias !== key.alias)) continue;
    out.push({
      at: event.metadata.occurredAt,
      actor: event.metadata.actor,
      action: after ? 'configured' : 'removed',
      source: event.data.source,
      alias: event.data.alias,
      config: after,
      changedPaths: changedPaths(before, after ?? {}),
    });
  }
  return out;
}
