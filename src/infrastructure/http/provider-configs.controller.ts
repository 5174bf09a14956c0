import { Controller, Delete, Get, HttpCode, Inject, Put, Query, Req } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import type { Request } from 'express';
import {
  ConfigureProviderCommand,
  RemoveProviderConfigCommand,
} from '../../application/refresh/refresh-commands';
import { EVENT_STORE, EventStore } from '../../application/ports/event-store.port';
import {
  isProviderConfigEvent,
  PROVIDER_CONFIG_NOT_FOUND,
  ProviderConfigChange,
  ProviderConfigEvent,
  providerConfigHistory,
  providerConfigsStreamId,
} from '../../domain/refresh';
import { DomainError } from '../../domain/shared/domain-error';
import type { RecordedEvent } from '../../domain/shared/event';
import { STATE_NOT_FOUND } from '../../domain/state';
import { normaliseProviderSource } from '../provider/provider-address';
import { RefreshReadModel, StoredProviderConfig } from '../read-models/refresh-read-model';
import { callerOf } from './caller';
import { readBody } from './read-body';
import { jsonBody, parseProviderConfig } from './refresh-requests';
import { stateNameFrom } from './state-name';

type Req_ = Request & { id?: string };

const CONFIG_BODY = 1024 * 1024;

interface ConfigQuery {
  state?: string;
  source?: string;
  alias?: string;
}

/** One change as the API returns it. */
export interface ProviderConfigChangeWire {
  at: string;
  actor: string;
  action: ProviderConfigChange['action'];
  source: string;
  alias: string | null;
  config: ProviderConfigChange['config'];
  changed_paths: string[];
}

/** The PUT answer: what is stored now, and whose config it replaced (null when none). */
export type StoredProviderConfigAnswer = StoredProviderConfig & {
  replaced: { updated_at: string; updated_by: string } | null;
};

/**
 * Provider configurations per state, as refresh passes them to Configure.
 * Stored exactly as given; secrets must be `{"env": "NAME"}` references,
 * which only the machine running the provider resolves. `source` is
 * normalised (`hashicorp/aws` ≡ `registry.terraform.io/hashicorp/aws`); an
 * absent or empty `alias` is the default configuration.
 */
@Controller('v1/provider-configs')
export class ProviderConfigsController {
  constructor(
    private readonly commands: CommandBus,
    private readonly read: RefreshReadModel,
    @Inject(EVENT_STORE) private readonly events: EventStore,
  ) {}

  @Put()
  @HttpCode(200)
  async put(@Req() req: Req_): Promise<StoredProviderConfigAnswer | null> {
    const body = parseProviderConfig(jsonBody(await readBody(req, CONFIG_BODY, 'provider config')));
    const source = normaliseProviderSource(body.source);
    const before = await this.read.providerConfig(body.state, source, body.alias);
    await this.commands.execute(
      new ConfigureProviderCommand(
        body.state,
        source,
        body.alias,
        body.config,
        callerOf(req),
        body.checkSchema,
      ),
    );
    const stored = await this.read.providerConfig(body.state, source, body.alias);
    if (!stored) return null;
    const changed = before && before.updated_at !== stored.updated_at;
    return {
      ...stored,
      replaced: changed ? { updated_at: before.updated_at, updated_by: before.updated_by } : null,
    };
  }

  /**
   * Who set or removed which config and when, oldest first, from the
   * configs' event stream; one config's with `source` (and `alias`).
   */
  @Get('history')
  async history(@Query() q: ConfigQuery): Promise<{ history: ProviderConfigChangeWire[] }> {
    const state = stateNameFrom(q.state);
    const recorded = await this.events.readStream(providerConfigsStreamId(state));
    const events = recorded.filter((e): e is RecordedEvent & ProviderConfigEvent =>
      isProviderConfigEvent(e),
    );
    if (events.length === 0 && !(await this.read.stateExists(state))) {
      throw new DomainError(STATE_NOT_FOUND, `state ${state} does not exist`);
    }
    const history = providerConfigHistory(events, q.source === undefined ? undefined : key(q));
    return {
      history: history.map((h) => ({
        at: h.at,
        actor: h.actor,
        action: h.action,
        source: h.source,
        alias: h.alias,
        config: h.config,
        changed_paths: h.changedPaths,
      })),
    };
  }

  @Get()
  async get(
    @Query() q: ConfigQuery,
  ): Promise<{ configs: StoredProviderConfig[] } | StoredProviderConfig> {
    const state = stateNameFrom(q.state);
    if (q.source === undefined) return { configs: await this.read.providerConfigs(state) };
    const { source, alias } = key(q);
    const found = await this.read.providerConfig(state, source, alias);
    if (!found) throw notFound(state, source, alias);
    return found;
  }

  @Delete()
  @HttpCode(200)
  async remove(@Query() q: ConfigQuery, @Req() req: Req_): Promise<{ removed: true }> {
    const state = stateNameFrom(q.state);
    const { source, alias } = key(q);
    await this.commands.execute(
      new RemoveProviderConfigCommand(state, source, alias, callerOf(req)),
    );
    return { removed: true };
  }
}

function key(q: ConfigQuery): { source: string; alias: string | null } {
  if (typeof q.source !== 'string' || q.source === '') {
    throw new DomainError('REQUEST.INVALID', 'source is required');
  }
  if (q.alias !== undefined && typeof q.alias !== 'string') {
    throw new DomainError('REQUEST.INVALID', 'alias must be given once');
  }
  return { source: normaliseProviderSource(q.source), alias: q.alias || null };
}

function notFound(state: string, source: string, alias: string | null): DomainError {
  return new DomainError(
    PROVIDER_CONFIG_NOT_FOUND,
    `no config stored for provider ${source}${alias ? ` (alias ${alias})` : ''} of state ${state}`,
  );
}
