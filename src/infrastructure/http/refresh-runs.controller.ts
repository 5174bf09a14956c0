import { Controller, Get, HttpCode, Inject, Param, Post, Query, Req } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import type { Request } from 'express';
import {
  FinishRefreshRunCommand,
  RecordRefreshResultsCommand,
  StartRefreshRunCommand,
} from '../../application/refresh/refresh-commands';
import { REFRESH_NOT_FOUND } from '../../domain/refresh';
import { STATE_NOT_FOUND } from '../../domain/state';
import { DomainError } from '../../domain/shared/domain-error';
import { CONFIG, type Config } from '../config/config';
import { RefreshReadModel, RefreshRunSummary } from '../read-models/refresh-read-model';
import { callerOf } from './caller';
import { readBody } from './read-body';
import { jsonBody, parseFinish, parseResults, parseStartRun } from './refresh-requests';
import { stateNameFrom } from './state-name';

type Req_ = Request & { id?: string };

const SMALL_BODY = 64 * 1024;

/**
 * The refresh run API `kl refresh` drives: start, send results in batches,
 * finish (which commits the refreshed document when the run may), and read
 * runs back. Every body and answer is snake_case JSON.
 */
@Controller('v1/refresh-runs')
export class RefreshRunsController {
  constructor(
    private readonly commands: CommandBus,
    private readonly runs: RefreshReadModel,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  @Post()
  @HttpCode(201)
  async start(@Req() req: Req_) {
    const body = parseStartRun(jsonBody(await readBody(req, SMALL_BODY)));
    const caller = callerOf(req);
    const started = await this.commands.execute(
      new StartRefreshRunCommand({
        stateName: body.state,
        dryRun: body.dryRun,
        caller: { ...caller, actor: body.actor ?? caller.actor },
      }),
    );
    return {
      run_id: started.runId,
      state_id: started.stateId,
      from_version: started.fromVersion,
      from_serial: started.fromSerial,
    };
  }

  @Post(':runId/results')
  @HttpCode(200)
  async results(@Param('runId') runId: string, @Req() req: Req_) {
    const body = jsonBody(await readBody(req, this.config.maxStateBytes, 'refresh results'));
    return this.commands.execute(
      new RecordRefreshResultsCommand({
        runId,
        results: parseResults(body),
        caller: callerOf(req),
      }),
    );
  }

  @Post(':runId/finish')
  @HttpCode(200)
  async finish(@Param('runId') runId: string, @Req() req: Req_) {
    const body = parseFinish(
      jsonBody(await readBody(req, this.config.maxStateBytes, 'refresh finish')),
    );
    const finished = await this.commands.execute(
      new FinishRefreshRunCommand({
        runId,
        status: body.status,
        errorSummary: body.errorSummary,
        document: body.document,
        lockId: body.lockId,
        caller: callerOf(req),
      }),
    );
    return {
      run_id: finished.runId,
      status: finished.status,
      to_version: finished.toVersion,
      checked: finished.checked,
      changed: finished.changed,
      failed: finished.failed,
      normalized: finished.normalized,
      skipped: finished.skipped,
    };
  }

  @Get(':runId')
  async get(@Param('runId') runId: string): Promise<RefreshRunSummary> {
    const run = await this.runs.run(runId);
    if (!run) throw new DomainError(REFRESH_NOT_FOUND, `refresh run ${runId} does not exist`);
    return run;
  }

  @Get()
  async list(
    @Query('state') state: string | undefined,
    @Query('limit') limitParam: string | undefined,
  ): Promise<{ runs: RefreshRunSummary[] }> {
    const limit = limitParam === undefined ? 50 : Number(limitParam);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
      throw new DomainError('REQUEST.INVALID', 'limit must be an integer from 1 to 1000');
    }
    const name = state === undefined ? null : stateNameFrom(state);
    const runs = await this.runs.runs(name, limit);
    if (name !== null && runs.length === 0 && !(await this.runs.stateExists(name))) {
      throw new DomainError(STATE_NOT_FOUND, `state ${name} does not exist`);
    }
    return { runs };
  }
}
