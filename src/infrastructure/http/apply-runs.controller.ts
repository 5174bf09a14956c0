import { Controller, Get, HttpCode, Inject, Param, Post, Query, Req, Res } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import type { Request, Response } from 'express';
import { webcrypto } from 'node:crypto';
import {
  AbortApplyRunCommand,
  CommitApplyRunCommand,
  FinishApplyRunCommand,
  RenewApplyRunCommand,
  StartApplyRunCommand,
} from '../../application/apply-runs/apply-run-commands';
import { CLOCK, type Clock } from '../../application/ports/clock.port';
import { APPLY_NOT_FOUND, applyNotFound } from '../../domain/apply';
import { DomainError } from '../../domain/shared/domain-error';
import {
  APPLY_STALE,
  Holder,
  RESERVATION_CONFLICT,
  RESERVATION_NOT_HELD,
  StaleAddress,
  STATE_NOT_FOUND,
} from '../../domain/state';
import { CONFIG, type Config } from '../config/config';
import { ApplyReadModel } from '../read-models/apply-read-model';
import { StateCatalogReadModel } from '../read-models/state-catalog-read-model';
import {
  parseCommit,
  parseFinishApplyRun,
  parseHeartbeat,
  jsonBody,
  parseStartApplyRun,
  runIdFrom,
  startedRunWire,
} from './apply-run-requests';
import { callerOf } from './caller';
import { withDetails } from './error.filter';
import { readBody } from './read-body';
import { stateNameFrom } from './state-name';
import {
  Access,
  authorize,
  authorizeFoundById,
  principalOf,
  readablePatterns,
  stateInPath,
} from './access';
import { Heavy } from './caller-bounds';
import { ApplyRunsQueryDto } from './dto/apply-runs.dto';

type Req_ = Request & { id?: string };

const SMALL_BODY = 64 * 1024;

/** A conflict's holders as the wire shows them (what `kl apply` prints). */
function holderWire(h: Holder) {
  return {
    kind: h.kind,
    glob: h.glob,
    mode: h.mode,
    actor: h.actor,
    run_id: h.runId,
    lock_id: h.lockId,
    acquired_at: h.acquiredAt,
    expires_at: h.expiresAt,
    ...(h.kind === 'apply' ? {} : { lock_info: h.lockInfo }),
  };
}

/** The refusals a client acts on carry what it needs to act: who holds what, what changed. */
export function withWireDetails(err: unknown): unknown {
  if (!(err instanceof DomainError)) return err;
  switch (err.code) {
    case RESERVATION_CONFLICT:
      return withDetails(err, {
        holders: (err.metadata.holders as Holder[]).map(holderWire),
      });
    case APPLY_STALE:
      return withDetails(err, {
        addresses: (err.metadata.addresses as StaleAddress[]).map((a) => ({
          address: a.address,
          changed_in_version: a.changedInVersion,
        })),
      });
    case RESERVATION_NOT_HELD:
      return withDetails(err, { addresses: err.metadata.addresses ?? [] });
    default:
      return err;
  }
}

export async function sha256(body: Buffer): Promise<string> {
  return Buffer.from(await webcrypto.subtle.digest('SHA-256', body)).toString('hex');
}

function emptyOrJson(body: Buffer) {
  return body.toString('utf8').trim() === '' ? {} : jsonBody(body);
}

/**
 * The apply-run API `kl apply` drives (docs/api.md): start a run (its
 * reservations, all or nothing), heartbeat, commit its row-level change,
 * finish it without a commit, abort it; and read reservations and runs.
 * Every body and answer is snake_case JSON; refusals store nothing.
 */
@Controller('v1/api')
export class ApplyRunsController {
  constructor(
    private readonly commands: CommandBus,
    private readonly runs: ApplyReadModel,
    private readonly states: StateCatalogReadModel,
    @Inject(CONFIG) private readonly config: Config,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  @Post('states/*name/apply-runs')
  @Access.state('write', stateInPath('name'))
  @Heavy('run')
  @HttpCode(201)
  async start(@Param('name') param: string[], @Req() req: Req_) {
    const state = stateNameFrom(param);
    // Write and read sets of a big plan are long: as long as a document may be.
    const body = jsonBody(await readBody(req, this.config.maxStateBytes, 'apply run'));
    const started = await this.commands
      .execute(
        new StartApplyRunCommand({
          name: state,
          ...parseStartApplyRun(body),
          caller: callerOf(req),
        }),
      )
      .catch((err: unknown) => {
        throw withWireDetails(err);
      });
    return startedRunWire(started);
  }

  @Post('states/*name/apply-runs/:runId/heartbeat')
  @Access.state('write', stateInPath('name'))
  @HttpCode(200)
  async heartbeat(@Param('name') param: string[], @Param('runId') id: string, @Req() req: Req_) {
    const state = stateNameFrom(param);
    const runId = runIdFrom(id);
    const lease = parseHeartbeat(emptyOrJson(await readBody(req, SMALL_BODY, 'heartbeat')));
    const { expiresAt } = await this.commands.execute(
      new RenewApplyRunCommand({ name: state, runId, leaseSeconds: lease, caller: callerOf(req) }),
    );
    return { expires_at: expiresAt };
  }

  @Post('states/*name/apply-runs/:runId/commit')
  @Access.state('write', stateInPath('name'))
  @HttpCode(200)
  async commit(@Param('name') param: string[], @Param('runId') id: string, @Req() req: Req_) {
    const state = stateNameFrom(param);
    const runId = runIdFrom(id);
    const raw = await readBody(req, this.config.maxStateBytes, 'commit');
    const body = jsonBody(raw);
    const change = parseCommit(body, await sha256(raw));
    const { version, serial } = await this.commands
      .execute(new CommitApplyRunCommand({ name: state, runId, ...change, caller: callerOf(req) }))
      .catch((err: unknown) => {
        throw withWireDetails(err);
      });
    return { version, serial };
  }

  @Post('states/*name/apply-runs/:runId/finish')
  @Access.state('write', stateInPath('name'))
  @HttpCode(200)
  async finish(@Param('name') param: string[], @Param('runId') id: string, @Req() req: Req_) {
    const state = stateNameFrom(param);
    const runId = runIdFrom(id);
    // It may carry the whole document terraform left.
    const body = jsonBody(await readBody(req, this.config.maxStateBytes, 'finish'));
    const f = parseFinishApplyRun(body);
    await this.commands.execute(
      new FinishApplyRunCommand({ name: state, runId, ...f, caller: callerOf(req) }),
    );
    return { run_id: runId, state, status: f.status };
  }

  @Post('states/*name/apply-runs/:runId/abort')
  @Access.state('write', stateInPath('name'))
  @HttpCode(200)
  async abort(@Param('name') param: string[], @Param('runId') id: string, @Req() req: Req_) {
    return this.doAbort(stateNameFrom(param), id, req);
  }

  /** The same, for an operator who knows only the run id: its state is looked up. */
  @Post('apply-runs/:runId/abort')
  @Access.anyState('write')
  @HttpCode(200)
  async abortAnywhere(@Param('runId') id: string, @Req() req: Req_) {
    // The state is known only once the run is found; the handler asks before it writes.
    return this.doAbort(null, id, req, (state) =>
      authorizeFoundById(req, 'write', state, () => applyNotFound(runIdFrom(id))),
    );
  }

  private async doAbort(
    state: string | null,
    id: string,
    req: Req_,
    mayWrite?: (state: string) => void,
  ) {
    const runId = runIdFrom(id);
    const body = emptyOrJson(await readBody(req, SMALL_BODY, 'abort'));
    if (Object.keys(body).length > 0) {
      throw new DomainError('REQUEST.INVALID', 'an abort takes no body (or {})');
    }
    const aborted = await this.commands.execute(
      new AbortApplyRunCommand({ name: state, runId, caller: callerOf(req), mayWrite }),
    );
    return {
      run_id: aborted.runId,
      state: aborted.state,
      status: aborted.status,
      released: aborted.released,
    };
  }

  @Get('states/*name/reservations')
  @Access.state('read', stateInPath('name'))
  async reservations(@Param('name') param: string[]) {
    const state = stateNameFrom(param);
    await this.requireState(state);
    return { state, ...(await this.runs.reservations(this.clock.now(), state)) };
  }

  @Get('reservations')
  @Access.anyState('read')
  async allReservations(@Req() req: Req_) {
    const grants = principalOf(req).grants;
    const all = await this.runs.reservations(this.clock.now());
    return {
      reservations: all.reservations.filter((r) => grants.can('read', r.state)),
      runs: all.runs.filter((r) => grants.can('read', r.state)),
    };
  }

  @Get('apply-runs')
  @Access.anyState('read')
  async list(@Query() query: ApplyRunsQueryDto, @Req() req: Req_) {
    const { state } = query;
    if (state !== undefined) authorize(req, 'read', state);
    return { runs: await this.runs.runs(state, query.limit ?? 100, readablePatterns(req)) };
  }

  @Get('apply-runs/:runId')
  @Access.anyState('read')
  async runAnywhere(@Param('runId') id: string, @Req() req: Req_) {
    const runId = runIdFrom(id);
    const run = await this.runs.run(runId);
    if (run === null) throw applyNotFound(runId);
    authorizeFoundById(req, 'read', run.state, () => applyNotFound(runId));
    return run;
  }

  @Get('states/*name/apply-runs/:runId')
  @Access.state('read', stateInPath('name'))
  async run(@Param('name') param: string[], @Param('runId') id: string) {
    const state = stateNameFrom(param);
    const runId = runIdFrom(id);
    const run = await this.runs.run(runId);
    if (run === null || run.state !== state) {
      throw new DomainError(APPLY_NOT_FOUND, `apply run ${runId} on state ${state} does not exist`);
    }
    return run;
  }

  /** The state document a run that did not commit kept, exactly as stored. */
  @Get('states/*name/apply-runs/:runId/output-state')
  @Access.state('read', stateInPath('name'))
  async outputState(
    @Param('name') param: string[],
    @Param('runId') id: string,
    @Res() res: Response,
  ): Promise<void> {
    const state = stateNameFrom(param);
    const runId = runIdFrom(id);
    const run = await this.runs.run(runId);
    if (run === null || run.state !== state) {
      throw new DomainError(APPLY_NOT_FOUND, `apply run ${runId} on state ${state} does not exist`);
    }
    const text = await this.runs.outputState(runId);
    if (text === null) {
      throw new DomainError(APPLY_NOT_FOUND, `apply run ${runId} kept no output state`);
    }
    res.status(200).setHeader('Content-Type', 'application/json').end(text);
  }

  private async requireState(name: string): Promise<void> {
    if ((await this.states.live(name)) === null) {
      throw new DomainError(STATE_NOT_FOUND, `no state named "${name}"`);
    }
  }
}
