import { ApplyEvent, isApplyEvent } from '../../domain/apply';
import type { RecordedEvent } from '../../domain/shared/event';

/** A recorded event narrowed to the ApplyRun aggregate's union. */
export type RecordedApplyEvent = ApplyEvent & Pick<RecordedEvent, 'metadata' | 'streamId'>;

export function asApplyEvent(event: RecordedEvent): RecordedApplyEvent | null {
  return isApplyEvent(event) ? (event as RecordedApplyEvent) : null;
}
