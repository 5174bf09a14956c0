import { Body, Controller, Get, HttpCode, Param, Post, Query, Req } from '@nestjs/common';
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
import type { RefreshRunSummary } from '../../domain/wire/runs';
import { RefreshReadModel } from '../read-models/refresh-read-model';
import { Access, authorize, authorizeFoundById, readablePatterns } from './access';
import { callerOf } from './caller';
import {
  FinishRefreshRunDto,
  RefreshResultsDto,
  RefreshRunsQueryDto,
  StartRefreshRunDto,
} from './dto/refresh-run.dto';
import { JsonBody } from './json-body';
import { finishedDocumentOf, refreshResultsOf } from './refresh-requests';
import { Heavy } from './caller-bounds';

type Req_ = Request & { id?: string };

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
  ) {}

  @Post()
  @HttpCode(201)
  @Access.anyState('write')
  @JsonBody({ what: 'refresh run', limit: 64 * 1024, lossless: true })
  async start(@Body() body: StartRefreshRunDto, @Req() req: Req_) {
    authorize(req, 'write', body.state);
    const started = await this.commands.execute(
      new StartRefreshRunCommand({
        stateName: body.state,
        dryRun: body.dry_run ?? false,
        // With authentication on, a claimed actor is only "on behalf of".
        caller: callerOf(req, body.actor),
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
  @Access.anyState('write')
  @Heavy('run')
  @JsonBody({ what: 'refresh results', limit: 'maxStateBytes', lossless: true })
  async results(@Param('runId') runId: string, @Body() body: RefreshResultsDto, @Req() req: Req_) {
    await this.authorizeRun(req, runId, 'write');
    return this.commands.execute(
      new RecordRefreshResultsCommand({
        runId,
        results: refreshResultsOf(body),
        caller: callerOf(req),
      }),
    );
  }

  @Post(':runId/finish')
  @HttpCode(200)
  @Access.anyState('write')
  @JsonBody({ what: 'refresh finish', limit: 'maxStateBytes', lossless: true })
  async finish(@Param('runId') runId: string, @Body() body: FinishRefreshRunDto, @Req() req: Req_) {
    await this.authorizeRun(req, runId, 'write');
    const finished = await this.commands.execute(
      new FinishRefreshRunCommand({
        runId,
        status: body.status,
        errorSummary: body.error_summary ?? null,
        document: finishedDocumentOf(body),
        lockId: body.lock_id || null,
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
  @Access.anyState('read')
  async get(@Param('runId') runId: string, @Req() req: Req_): Promise<RefreshRunSummary> {
    return this.authorizeRun(req, runId, 'read');
  }

  /** The run, if the token may `access` its state (404 if it may not read it, 403 if not write). */
  private async authorizeRun(
    req: Req_,
    runId: string,
    access: 'read' | 'write',
  ): Promise<RefreshRunSummary> {
    const notFound = () =>
      new DomainError(REFRESH_NOT_FOUND, `refresh run ${runId} does not exist`);
    const run = await this.runs.run(runId);
    if (!run) throw notFound();
    authorizeFoundById(req, access, run.state_name, notFound);
    return run;
  }

  @Get()
  @Access.anyState('read')
  async list(
    @Query() query: RefreshRunsQueryDto,
    @Req() req: Req_,
  ): Promise<{ runs: RefreshRunSummary[] }> {
    const name = query.state ?? null;
    if (name !== null) authorize(req, 'read', name);
    // Without a state, the newest runs of the states this token may read.
    const runs = await this.runs.runs(name, query.limit ?? 50, readablePatterns(req));
    if (name !== null && runs.length === 0 && !(await this.runs.stateExists(name))) {
      throw new DomainError(STATE_NOT_FOUND, `state ${name} does not exist`);
    }
    return { runs };
  }
}
