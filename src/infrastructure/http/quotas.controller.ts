import { Body, Controller, Delete, Get, HttpCode, Post, Query, Req } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { RemoveQuotaCommand, SetQuotaCommand } from '../../application/quota/quota-commands';
import { describeVerdict } from '../../domain/quota';
import { QuotaReadModel, QuotaRuleRow, QuotaUsage } from '../read-models/quota-read-model';
import { Access, AuthedRequest, authorize, readablePatterns, stateInQuery } from './access';
import { callerOf } from './caller';
import {
  QuotaCheckQueryDto,
  QuotaGlobQueryDto,
  QuotaUsageQueryDto,
  SetQuotaDto,
} from './dto/quota.dto';
import { JsonBody } from './json-body';

/** What `kl quota check` and `kl plan` are told about a projected count. */
export interface QuotaCheckWire {
  state: string;
  current: number;
  creates: number;
  deletes: number;
  projected: number;
  quota: { glob: string; max_resources: number; soft_resources: number | null } | null;
  /** `hard` or `soft`: the projected count is over that limit; null: it fits. */
  over: 'hard' | 'soft' | null;
  message: string;
}

/**
 * Quotas (`kl quota`): rules are set and removed by `admin` tokens; usage
 * and checks are read by whoever may read the state.
 */
@Controller('v1/quotas')
export class QuotasController {
  constructor(
    private readonly commands: CommandBus,
    private readonly quotas: QuotaReadModel,
  ) {}

  @Get()
  @Access.anyState('read')
  async usage(
    @Query() query: QuotaUsageQueryDto,
    @Req() req: AuthedRequest,
  ): Promise<{ usage: QuotaUsage[] }> {
    if (query.state !== undefined) authorize(req, 'read', query.state);
    return { usage: await this.quotas.usage(readablePatterns(req), query.state) };
  }

  @Get('rules')
  @Access.admin()
  async rules(): Promise<{ quotas: QuotaRuleRow[] }> {
    return { quotas: await this.quotas.rules() };
  }

  @Get('check')
  @Access.state('read', stateInQuery)
  async check(@Query() query: QuotaCheckQueryDto): Promise<QuotaCheckWire> {
    const v = await this.quotas.check(query.state, query.creates, query.deletes);
    return {
      state: query.state,
      current: v.current,
      creates: query.creates,
      deletes: query.deletes,
      projected: v.projected,
      quota:
        v.quota === null
          ? null
          : {
              glob: v.quota.glob,
              max_resources: v.quota.maxResources,
              soft_resources: v.quota.softResources,
            },
      over: v.level,
      message: describeVerdict(query.state, v),
    };
  }

  @Post()
  @HttpCode(200)
  @Access.admin()
  @JsonBody({ what: 'quota', limit: 16 * 1024 })
  async set(@Body() body: SetQuotaDto, @Req() req: AuthedRequest) {
    const { changed } = await this.commands.execute(
      new SetQuotaCommand({
        glob: body.glob,
        maxResources: body.max_resources,
        softResources: body.soft_resources ?? null,
        caller: callerOf(req),
      }),
    );
    return {
      glob: body.glob,
      max_resources: body.max_resources,
      soft_resources: body.soft_resources ?? null,
      changed,
    };
  }

  @Delete()
  @HttpCode(200)
  @Access.admin()
  async remove(@Query() query: QuotaGlobQueryDto, @Req() req: AuthedRequest) {
    await this.commands.execute(
      new RemoveQuotaCommand({ glob: query.glob, caller: callerOf(req) }),
    );
    return { removed: query.glob };
  }
}
