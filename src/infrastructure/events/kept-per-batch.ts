import type { LoggedEvent } from '../../domain/shared/event';

/**
 * `encode` of a batch of events, kept while the batch's first event is held
 * by someone: subscribers catching up from the same place get the same
 * event objects (the feed reads each page once for them all) in the same
 * batches, so each batch is encoded once between them. A batch of other
 * events (or another length) that begins with the same event is encoded
 * anew, and replaces the one kept.
 */
export function keptPerBatch<T>(
  encode: (events: readonly LoggedEvent[]) => T,
): (events: readonly LoggedEvent[]) => T {
  const kept = new WeakMap<LoggedEvent, { events: readonly LoggedEvent[]; value: T }>();
  return (events) => {
    const [first] = events;
    if (first === undefined) return encode(events);
    const known = kept.get(first);
    if (known !== undefined && sameEvents(known.events, events)) return known.value;
    const value = encode(events);
    kept.set(first, { events, value });
    return value;
  };
}

function sameEvents(a: readonly LoggedEvent[], b: readonly LoggedEvent[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
