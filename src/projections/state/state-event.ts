import type { RecordedEvent } from '../../domain/shared/event';
import { isStateEvent, StateEvent } from '../../domain/state';

/** A recorded event narrowed to the State aggregate's union, so `switch (type)` narrows `data`. */
export type RecordedStateEvent = StateEvent &
  Pick<RecordedEvent, 'metadata' | 'streamId' | 'streamRevision' | 'position'>;

export function asStateEvent(event: RecordedEvent): RecordedStateEvent | null {
  return isStateEvent(event) ? (event as RecordedStateEvent) : null;
}
