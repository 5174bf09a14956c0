import { Controller, Delete, Get, HttpCode, Put, Query, Req } from '@nestjs/common';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import type { Request } from 'express';
import {
  ConfigureProviderCommand,
  RemoveProviderConfigCommand,
} from '../../application/refresh/refresh-commands';
import { ProviderConfigHistoryQuery } from '../../application/refresh/provider-config-history.query';
import { PROVIDER_CONFIG_NOT_FOUND, ProviderConfigChange } from '../../domain/refresh';
import { DomainError } from '../../domain/shared/domain-error';
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
    private readonly queries: QueryBus,
    private readonly read: RefreshReadModel,
  ) {}

  @Put()
  @HttpCode(200)
  async put(@Req() req: Req_): Promise<StoredProviderConfigAnswer | null> {
    const body = parseProviderConfig(jsonBody(await readBody(req, CONFIG_BODY, 'provider config')));
    const source = normaliseProviderSource(body.source);
    const before = await this.read.providerConfig(body.state, source, body.alias);
    await this.commands.execute(
      new ConfigureProviderCommand({
        stateName: body.state,
        source,
        alias: body.alias,
        config: body.config,
        checkSchema: body.checkSchema,
        caller: callerOf(req),
      }),
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
   * Who set or removed which config and when, oldest first; one config's
   * with `source` (and `alias`).
   */
  @Get('history')
  async history(@Query() q: ConfigQuery): Promise<{ history: ProviderConfigChangeWire[] }> {
    const history = await this.queries.execute(
      new ProviderConfigHistoryQuery({
        state: stateNameFrom(q.state),
        ...(q.source === undefined ? {} : { config: key(q) }),
      }),
    );
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
      new RemoveProviderConfigCommand({ stateName: state, source, alias, caller: callerOf(req) }),
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
