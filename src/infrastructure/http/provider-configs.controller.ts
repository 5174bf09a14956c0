import { Body, Controller, Delete, Get, HttpCode, Put, Query, Req } from '@nestjs/common';
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
import { ProviderConfigQueryDto, PutProviderConfigDto } from './dto/provider-config.dto';
import { JsonBody } from './json-body';
import { Access, stateInQuery } from './access';

type Req_ = Request & { id?: string };

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
  @Access.admin()
  @HttpCode(200)
  @JsonBody({ what: 'provider config', limit: 1024 * 1024, lossless: true })
  async put(
    @Body() body: PutProviderConfigDto,
    @Req() req: Req_,
  ): Promise<StoredProviderConfigAnswer | null> {
    const source = normaliseProviderSource(body.source);
    const alias = body.alias || null;
    const before = await this.read.providerConfig(body.state, source, alias);
    await this.commands.execute(
      new ConfigureProviderCommand({
        stateName: body.state,
        source,
        alias,
        config: body.config,
        checkSchema: !body.skip_schema_check,
        caller: callerOf(req),
      }),
    );
    const stored = await this.read.providerConfig(body.state, source, alias);
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
  @Access.state('read', stateInQuery)
  async history(
    @Query() q: ProviderConfigQueryDto,
  ): Promise<{ history: ProviderConfigChangeWire[] }> {
    const history = await this.queries.execute(
      new ProviderConfigHistoryQuery({
        state: q.state,
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
  @Access.state('read', stateInQuery)
  async get(
    @Query() q: ProviderConfigQueryDto,
  ): Promise<{ configs: StoredProviderConfig[] } | StoredProviderConfig> {
    const { state } = q;
    if (q.source === undefined) return { configs: await this.read.providerConfigs(state) };
    const { source, alias } = key(q);
    const found = await this.read.providerConfig(state, source, alias);
    if (!found) throw notFound(state, source, alias);
    return found;
  }

  @Delete()
  @Access.admin()
  @HttpCode(200)
  async remove(@Query() q: ProviderConfigQueryDto, @Req() req: Req_): Promise<{ removed: true }> {
    const { state } = q;
    const { source, alias } = key(q);
    await this.commands.execute(
      new RemoveProviderConfigCommand({ stateName: state, source, alias, caller: callerOf(req) }),
    );
    return { removed: true };
  }
}

function key(q: ProviderConfigQueryDto): { source: string; alias: string | null } {
  if (q.source === undefined) throw new DomainError('REQUEST.INVALID', 'source is required');
  return { source: normaliseProviderSource(q.source), alias: q.alias || null };
}

function notFound(state: string, source: string, alias: string | null): DomainError {
  return new DomainError(
    PROVIDER_CONFIG_NOT_FOUND,
    `no config stored for provider ${source}${alias ? ` (alias ${alias})` : ''} of state ${state}`,
  );
}
