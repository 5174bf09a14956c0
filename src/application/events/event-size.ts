import type { LoggedEvent } from '../../domain/shared/event';

/** What an event holds beside its data (ids, metadata, position), roughly. */
const EVENT_OVERHEAD_BYTES = 512;

/** The memory an event takes in kld, roughly: its data's text and what it holds beside. */
export function eventBytes(event: LoggedEvent): number {
  let data = event.dataJson?.length;
  if (data === undefined) {
    try {
      data = JSON.stringify(event.data)?.length ?? 0;
    } catch {
      data = 0;
    }
  }
  return data + EVENT_OVERHEAD_BYTES;
}
