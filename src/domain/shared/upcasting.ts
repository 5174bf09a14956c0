import { EVENT_SCHEMA_VERSION, RecordedEvent } from './event';

/**
 * Turns the data of one event type at schema version `from` into the shape
 * of version `from + 1`. Pure: it sees only the old data.
 */
export interface Upcaster {
  type: string;
  from: number;
  upcast(data: unknown): unknown;
}

/**
 * Every upcaster kld knows, applied when events are read, so every reader
 * (deciders, projectors, the event feed, archives) sees each type in its
 * current shape while the log keeps what was written. A type whose data
 * changes incompatibly gets an entry here (and its writers then write the
 * next version: `currentVersion`); docs/events.md says when.
 */
export const EVENT_UPCASTERS: readonly Upcaster[] = [];

export class Upcasters {
  private readonly steps = new Map<string, Upcaster>();
  private readonly current = new Map<string, number>();

  constructor(upcasters: readonly Upcaster[] = EVENT_UPCASTERS) {
    for (const u of upcasters) {
      const key = `${u.type}@${u.from}`;
      if (this.steps.has(key)) throw new Error(`two upcasters of ${u.type} from version ${u.from}`);
      this.steps.set(key, u);
      this.current.set(u.type, Math.max(this.current.get(u.type) ?? 0, u.from + 1));
    }
    for (const [type, version] of this.current) {
      for (let v = EVENT_SCHEMA_VERSION; v < version; v++) {
        if (!this.steps.has(`${type}@${v}`)) {
          throw new Error(`no upcaster of ${type} from version ${v} to ${v + 1}`);
        }
      }
    }
  }

  /** The version events of `type` are written at now. */
  currentVersion(type: string): number {
    return this.current.get(type) ?? EVENT_SCHEMA_VERSION;
  }

  /** The event in its type's current shape (itself when it is already). */
  upcast<E extends RecordedEvent>(event: E): E {
    const target = this.current.get(event.type);
    if (target === undefined || event.schemaVersion >= target) return event;
    let { data, schemaVersion } = event;
    for (; schemaVersion < target; schemaVersion++) {
      data = this.steps.get(`${event.type}@${schemaVersion}`)!.upcast(data) as E['data'];
    }
    return { ...event, data, schemaVersion };
  }
}

const KNOWN = new Upcasters(EVENT_UPCASTERS);

/** The schema version a writer gives a new event of `type`. */
export function currentSchemaVersion(type: string): number {
  return KNOWN.currentVersion(type);
}
