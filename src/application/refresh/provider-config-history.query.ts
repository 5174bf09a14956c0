import { Inject } from '@nestjs/common';
import { IQueryHandler, QueryHandler } from '@nestjs/cqrs';
import {
  isProviderConfigEvent,
  ProviderConfigChange,
  ProviderConfigEvent,
  providerConfigHistory,
  providerConfigsStreamId,
} from '../../domain/refresh';
import { DomainError } from '../../domain/shared/domain-error';
import type { RecordedEvent } from '../../domain/shared/event';
import { STATE_NOT_FOUND } from '../../domain/state';
import { EVENT_STORE, EventStore } from '../ports/event-store.port';
import { QueryWith } from '../props-message';
import { REFRESH_STATE_LOOKUP, RefreshStateLookup } from './refresh-read.port';

export interface ProviderConfigHistoryProps {
  state: string;
  /** One config's history (alias null: the default config); every config's when absent. */
  config?: { source: string; alias: string | null };
}

/** Who set or removed which provider config of a state and when, oldest first. */
export class ProviderConfigHistoryQuery extends QueryWith<
  ProviderConfigHistoryProps,
  ProviderConfigChange[]
>() {}

/**
 * Read from the configs' event stream rather than a read model: the history
 * is the stream itself, and one state's stream is short.
 */
@QueryHandler(ProviderConfigHistoryQuery)
export class ProviderConfigHistoryHandler implements IQueryHandler<ProviderConfigHistoryQuery> {
  constructor(
    @Inject(EVENT_STORE) private readonly events: EventStore,
    @Inject(REFRESH_STATE_LOOKUP) private readonly states: RefreshStateLookup,
  ) {}

  async execute(q: ProviderConfigHistoryQuery): Promise<ProviderConfigChange[]> {
    const recorded = await this.events.readStream(providerConfigsStreamId(q.state));
    const events = recorded.filter((e): e is RecordedEvent & ProviderConfigEvent =>
      isProviderConfigEvent(e),
    );
    if (events.length === 0 && !(await this.states.stateExists(q.state))) {
      throw new DomainError(STATE_NOT_FOUND, `state ${q.state} does not exist`);
    }
    return providerConfigHistory(events, q.config);
  }
}
