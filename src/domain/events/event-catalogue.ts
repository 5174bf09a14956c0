import { APPLY_EVENT_TYPES } from '../apply/apply-run.events';
import { TOKEN_EVENT_TYPES } from '../auth/token';
import { PROVIDER_CONFIG_EVENT_TYPES } from '../refresh/provider-configs';
import { REFRESH_EVENT_TYPES } from '../refresh/refresh-run.events';
import { STATE_EVENT_TYPES } from '../state/state.events';

/**
 * Every kind of stream in the log, by id prefix, and how a stream tells which
 * state it belongs to: by its id (`state-<name>`), or by the `stateName` in
 * the data of its first event (a run of something on a state), or not at all
 * (a stream of no state: only admins see it in the feed). Subscriptions
 * filter by state with this, and docs/events.md describes it.
 */
export interface StreamKind {
  prefix: string;
  state: 'in-id' | 'first-event' | 'none';
  types: readonly string[];
}

export const STREAM_KINDS: readonly StreamKind[] = [
  { prefix: 'state-', state: 'in-id', types: STATE_EVENT_TYPES },
  { prefix: 'refresh-', state: 'first-event', types: REFRESH_EVENT_TYPES },
  { prefix: 'provider-configs-', state: 'in-id', types: PROVIDER_CONFIG_EVENT_TYPES },
  { prefix: 'apply-', state: 'first-event', types: APPLY_EVENT_TYPES },
  { prefix: 'token-', state: 'none', types: TOKEN_EVENT_TYPES },
  // A new aggregate adds its stream kind here (and its events to docs/events.md).
];

/** Every event type the log may hold: what subscription filters accept. */
export const EVENT_TYPES: readonly string[] = STREAM_KINDS.flatMap((k) => k.types);

/**
 * The state a stream belongs to when its id says so; `undefined` when only its
 * first event can tell (`stateNameOf` that event), null for a stream of no state.
 */
export function stateOfStreamId(streamId: string): string | null | undefined {
  // Longest prefix first: `provider-configs-` must not be read as something shorter.
  const kind = [...STREAM_KINDS]
    .sort((a, b) => b.prefix.length - a.prefix.length)
    .find((k) => streamId.startsWith(k.prefix));
  if (!kind) return undefined;
  if (kind.state === 'none') return null;
  return kind.state === 'in-id' ? streamId.slice(kind.prefix.length) : undefined;
}

/** The state a stream's first event names (`data.stateName`), or null. */
export function stateNameOf(firstEventData: unknown): string | null {
  const name = (firstEventData as { stateName?: unknown } | null)?.stateName;
  return typeof name === 'string' ? name : null;
}
