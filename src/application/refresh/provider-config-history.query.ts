import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
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
import { REFRESH_STATE_LOOKUP, RefreshStateLookup } from './refresh-read.port';

export interface ProviderConfigHistoryProps {
  state: string;
  /** One config's history (alias null: the default config); every config's when absent. */
  config?: { source: string; alias: string | null };
}

/** Who set or removed which provider config of a state and when, oldest first. */
export class ProviderConfigHistoryQuery extends Query<ProviderConfigChange[]> {
  constructor(readonly props: ProviderConfigHistoryProps) {
    super();
  }
}

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

  async execute({ props }: ProviderConfigHistoryQuery): Promise<ProviderConfigChange[]> {
    const recorded = await this.events.readStream(providerConfigsStreamId(props.state));
    const events = recorded.filter((e): e is RecordedEvent & ProviderConfigEvent =>
      isProviderConfigEvent(e),
    );
    if (events.length === 0 && !(await this.states.stateExists(props.state))) {
      throw new DomainError(STATE_NOT_FOUND, `state ${props.state} does not exist`);
    }
    return providerConfigHistory(events, props.config);
  }
}
