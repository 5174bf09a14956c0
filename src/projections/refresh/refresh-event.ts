import type { RecordedEvent } from '../../domain/shared/event';
import { isProviderConfigEvent, ProviderConfigEvent } from '../../domain/refresh/provider-configs';
import { isRefreshEvent, RefreshEvent } from '../../domain/refresh/refresh-run.events';

type Recorded<E> = E & Pick<RecordedEvent, 'metadata' | 'streamId' | 'streamRevision' | 'position'>;

/** Recorded events narrowed to their union, so `switch (type)` narrows `data`. */
export function asRefreshEvent(event: RecordedEvent): Recorded<RefreshEvent> | null {
  return isRefreshEvent(event) ? (event as Recorded<RefreshEvent>) : null;
}

export function asProviderConfigEvent(event: RecordedEvent): Recorded<ProviderConfigEvent> | null {
  return isProviderConfigEvent(event) ? (event as Recorded<ProviderConfigEvent>) : null;
}
