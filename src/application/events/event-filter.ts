import picomatch from 'picomatch';
import { EVENT_TYPES, STREAM_KINDS } from '../../domain/events/event-catalogue';
import { DomainError } from '../../domain/shared/domain-error';
import type { Grants } from '../../domain/auth';
import type { RecordedEvent } from '../../domain/shared/event';

/** A subscription filter that names something no event can have. */
export const EVENTS_INVALID_FILTER = 'EVENTS.INVALID_FILTER';

/** What a consumer asked for; each list is "any of", and the lists combine with "and". */
export interface EventFilterSpec {
  /** State names or globs (`team/*`, `team/**`, `{a,b}`). */
  states?: readonly string[];
  /** Stream id prefixes (`state-team/`, `refresh-`). */
  streamPrefixes?: readonly string[];
  types?: readonly string[];
}

/**
 * May this caller see events of this state (null: events of no state)?
 * Decided once per subscription from the caller's grants (`eventAccess`).
 */
export type EventAccess = (state: string | null) => boolean;
export const ALLOW_ALL: EventAccess = () => true;

/**
 * The one rule of who sees which events, for every transport (SSE, gRPC):
 * events of a state to whoever may read that state; events of no state
 * (tokens) to admins only. With authentication off everything is allowed,
 * and the filter stays as cheap as no filter at all.
 */
export function eventAccess(grants: Grants): EventAccess {
  if (grants.unrestricted) return ALLOW_ALL;
  const admin = grants.has('admin');
  // A subscription asks per event, about few distinct states: answer each once.
  const known = new Map<string, boolean>();
  return (state) => {
    if (state === null) return admin;
    let may = known.get(state);
    if (may === undefined) {
      if (known.size >= KNOWN_STATES) known.clear();
      may = grants.can('read', state);
      known.set(state, may);
    }
    return may;
  };
}

const KNOWN_STATES = 10_000;

const MAX_VALUES = 100;
const MAX_LENGTH = 512;
/**
 * Wildcards (`*` or `**`) a state glob may hold. picomatch makes each a lazy
 * `[^/]*?` (or its any-depth form), and a regular expression backtracks
 * through every way of splitting a name among them: with two a 512-character
 * name is matched in about a millisecond, with three in 50 ms, with 26 not
 * before the caller has long gone, and kld's one thread does nothing else
 * meanwhile.
 */
const MAX_WILDCARDS = 2;
/** Names whose match a filter remembers (events come from few states). */
const REMEMBERED_STATES = 10_000;
// State-name characters (state-name.ts) and glob syntax.
const STATE_GLOB = /^[A-Za-z0-9._@+=\-/*?{},[\]!]+$/;

/**
 * A compiled filter. Type and stream tests are synchronous; a state test
 * needs the state of the event's stream, which a run stream only names in
 * its first event (event-catalogue.ts), so the feed looks that up.
 */
export class EventFilter {
  private constructor(
    private readonly types: ReadonlySet<string> | null,
    private readonly prefixes: readonly string[] | null,
    private readonly stateGlob: ((name: string) => boolean) | null,
    private readonly access: EventAccess,
  ) {}

  /** Throws DomainError EVENTS.INVALID_FILTER naming the value that cannot match. */
  static compile(spec: EventFilterSpec = {}, access: EventAccess = ALLOW_ALL): EventFilter {
    const types = values(spec.types, 'type');
    for (const type of types) {
      if (!EVENT_TYPES.includes(type)) {
        throw invalid(`unknown event type "${short(type)}" (known: ${EVENT_TYPES.join(', ')})`);
      }
    }
    const prefixes = values(spec.streamPrefixes, 'stream prefix');
    const kinds = STREAM_KINDS.map((k) => k.prefix);
    for (const prefix of prefixes) {
      if (!kinds.some((k) => k.startsWith(prefix) || prefix.startsWith(k))) {
        throw invalid(
          `stream prefix "${short(prefix)}" matches no stream (streams start with ${kinds.join(', ')})`,
        );
      }
    }
    const states = values(spec.states, 'state');
    for (const glob of states) {
      if (!STATE_GLOB.test(glob)) {
        throw invalid(
          `state filter "${short(glob)}" is neither a state name nor a glob ` +
            '(letters, digits, . _ @ + = - / and * ? { } , [ ] !)',
        );
      }
      const wildcards = (glob.match(/\*+/g) ?? []).length;
      if (wildcards > MAX_WILDCARDS) {
        throw invalid(
          `state filter "${short(glob)}" has ${wildcards} wildcards; a glob has at most ` +
            `${MAX_WILDCARDS} (* or **): give several filters instead`,
        );
      }
    }
    return new EventFilter(
      types.length ? new Set(types) : null,
      prefixes.length ? prefixes : null,
      states.length ? remembered(picomatch(states)) : null,
      access,
    );
  }

  /** Whether some events may be left out (then checkpoints keep the consumer's place). */
  get filters(): boolean {
    return (
      this.types !== null ||
      this.prefixes !== null ||
      this.stateGlob !== null ||
      this.access !== ALLOW_ALL
    );
  }

  /** Whether matching needs the state of the event's stream. */
  get needsState(): boolean {
    return this.stateGlob !== null || this.access !== ALLOW_ALL;
  }

  /** The tests that need no state. */
  matchesEvent(event: Pick<RecordedEvent, 'type' | 'streamId'>): boolean {
    if (this.types && !this.types.has(event.type)) return false;
    if (this.prefixes && !this.prefixes.some((p) => event.streamId.startsWith(p))) return false;
    return true;
  }

  /** The state tests, given the state of the event's stream (null: none). */
  matchesState(state: string | null): boolean {
    if (!this.access(state)) return false;
    if (this.stateGlob === null) return true;
    return state !== null && this.stateGlob(state);
  }
}

/** `matches`, asked once per name (up to REMEMBERED_STATES names, then afresh). */
function remembered(matches: (name: string) => boolean): (name: string) => boolean {
  const known = new Map<string, boolean>();
  return (name) => {
    let match = known.get(name);
    if (match === undefined) {
      if (known.size >= REMEMBERED_STATES) known.clear();
      match = matches(name);
      known.set(name, match);
    }
    return match;
  };
}

function values(list: readonly string[] | undefined, what: string): string[] {
  const all = [...new Set(list ?? [])];
  if (all.length > MAX_VALUES) invalidThrow(`at most ${MAX_VALUES} ${what} filters`);
  for (const v of all) {
    if (typeof v !== 'string' || v === '') invalidThrow(`an empty ${what} filter matches nothing`);
    if (v.length > MAX_LENGTH) invalidThrow(`a ${what} filter is at most ${MAX_LENGTH} characters`);
  }
  return all;
}

function invalid(message: string): DomainError {
  return new DomainError(EVENTS_INVALID_FILTER, message);
}

function invalidThrow(message: string): never {
  throw invalid(message);
}

function short(text: string): string {
  return text.length > 80 ? `${text.slice(0, 80)}…` : text;
}
