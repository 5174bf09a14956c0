import { Body, Controller, Get, HttpCode, Inject, Param, Post, Req, Res } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { Access, stateInPath } from './access';
import type { Request, Response } from 'express';
import {
  CommitApplyRunCommand,
  FinishApplyRunCommand,
  StartApplyRunCommand,
} from '../../application/apply-runs/apply-run-commands';
import { EVENT_STORE, type EventStore } from '../../application/ports/event-store.port';
import {
  awaitReadModels,
  READ_MODEL_SYNC,
  type ReadModelSync,
} from '../../application/ports/read-model-sync.port';
import {
  addressCandidate,
  Candidate,
  moduleCandidate,
  selectorCandidate,
} from '../../domain/state-engine/scope';
import { formatAddressGlob } from '../../domain/reservations/address-glob';
import { DomainError } from '../../domain/shared/domain-error';
import { DEFAULT_LEASE_SECONDS, STATE_NOT_FOUND } from '../../domain/state';
import { CONFIG, type Config } from '../config/config';
import { StateEngineReadModel } from '../read-models/state-engine-read-model';
import {
  jsonBody,
  parseCommit,
  parseFinishApplyRun,
  runIdFrom,
  startedRunWire,
} from './apply-run-requests';
import { sha256, withWireDetails } from './apply-runs.controller';
import { callerOf } from './caller';
import { CandidatesDto, ExpandScopeDto, SliceDto, StartEngineRunDto } from './dto/state-engine.dto';
import { STATE_VERSION_HEADER } from './headers';
import { JsonBody } from './json-body';
import { readBody } from './read-body';
import { stateNameFrom } from './state-name';
import { Heavy } from './caller-bounds';
import { writeInTurns } from './write-in-turns';

/** The protocol this kld speaks on the state-engine lane; a client checks it before relying on it. */
export const STATE_ENGINE_PROTOCOL = 1;

export const STATE_ENGINE_OPERATIONS = [
  'scope',
  'slice',
  'runs',
  'delta-commit',
  'scope-slice',
  'state-mv',
  'rollback-resource',
] as const;

/**
 * The request's candidates, each distinct one once (the first spelling):
 * every candidate is matched against every instance it covers, so 100,000
 * copies of `{"type": T}` made one request hold 100,000 lists of all the
 * state's instances and ran kld out of memory.
 */
function candidatesOf(body: CandidatesDto): Candidate[] {
  const candidates = [
    ...(body.addresses ?? []).map(addressCandidate),
    ...(body.module_prefixes ?? []).map(moduleCandidate),
    ...(body.selectors ?? []).map((s) => selectorCandidate({ type: s.type, module: s.module })),
  ];
  const seen = new Set<string>();
  return candidates.filter((c) => {
    const key = `${c.kind}\u0000${c.type ?? ''}\u0000${formatAddressGlob(c.glob)}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/**
 * The state-engine lane (ADR 0029, docs/state-engine.md): metadata, scope
 * expansion and slices read from the read models; writes are apply runs on
 * lane `state-engine` whose reservations hold off terraform (the coarse
 * lock) and whose change is committed by the one row-level commit path.
 */
@Controller('v1/engine')
export class StateEngineController {
  constructor(
    private readonly commands: CommandBus,
    private readonly engine: StateEngineReadModel,
    @Inject(CONFIG) private readonly config: Config,
    @Inject(EVENT_STORE) private readonly events: EventStore,
    @Inject(READ_MODEL_SYNC) private readonly sync: ReadModelSync,
  ) {}

  @Get()
  @Access.public()
  protocol() {
    return { protocol_version: STATE_ENGINE_PROTOCOL, operations: STATE_ENGINE_OPERATIONS };
  }

  @Get('states/*name')
  @Access.state('read', stateInPath('name'))
  async metadata(@Param('name') param: string[]) {
    const name = stateNameFrom(param);
    await this.caughtUp();
    const head = await this.engine.head(name);
    if (head === null) throw notFound(name);
    return {
      state: head.name,
      state_id: head.stateId,
      lineage: head.lineage,
      serial: head.serial,
      version: head.version,
      terraform_version: head.terraformVersion,
      instance_count: head.instanceCount,
      resource_count: head.resourceCount,
      protocol_version: STATE_ENGINE_PROTOCOL,
      operations: STATE_ENGINE_OPERATIONS,
    };
  }

  @Post('states/*name/scope')
  @Access.state('read', stateInPath('name'))
  @Heavy('engine')
  @HttpCode(200)
  @JsonBody({ what: 'scope request', limit: 'maxStateBytes' })
  async scope(
    @Param('name') param: string[],
    @Body() body: ExpandScopeDto,
    @Res() res: Response,
  ): Promise<void> {
    const name = stateNameFrom(param);
    const candidates = candidatesOf(body);
    await this.caughtUp();
    const { head, slice, ...answer } =
      body.slice === true
        ? await this.engine.expandWithSlice(name, candidates)
        : { ...(await this.engine.expand(name, candidates)), slice: null };
    const text = JSON.stringify({
      state: head.name,
      version: head.version,
      serial: head.serial,
      lineage: head.lineage,
      instance_count: head.instanceCount,
      ...answer,
    });
    res.status(200).setHeader('Content-Type', 'application/json');
    if (slice === null) {
      res.end(text);
      return;
    }
    // The slice's document is the same text /slice streams, set in as it is (exact numbers).
    // Its length goes before it: one reading of its pages counts it, another writes it, so
    // kld holds a page of it at a time, not the document (slice-text.ts).
    res.setHeader('X-Kilolock-Slice-Instances', String(slice.instanceCount));
    let bytes = 0;
    for await (const piece of slice.text()) bytes += Buffer.byteLength(piece);
    const meta = JSON.stringify({
      version: slice.version,
      serial: slice.serial,
      instances: slice.instanceCount,
      bytes,
    });
    res.write(`${text.slice(0, -1)},"slice":${meta.slice(0, -1)},"document":`);
    await writeInTurns(res, slice.text(), '}}');
  }

  @Post('states/*name/slice')
  @Access.state('read', stateInPath('name'))
  @Heavy('engine')
  @HttpCode(200)
  @JsonBody({ what: 'slice request', limit: 'maxStateBytes' })
  async slice(
    @Param('name') param: string[],
    @Body() body: SliceDto,
    @Res() res: Response,
  ): Promise<void> {
    const name = stateNameFrom(param);
    const candidates = candidatesOf(body);
    await this.caughtUp();
    const slice = await this.engine.slice(name, candidates, body.version);
    res
      .status(200)
      .setHeader('Content-Type', 'application/json')
      .setHeader(STATE_VERSION_HEADER, String(slice.version))
      .setHeader('X-Kilolock-State-Serial', String(slice.serial))
      .setHeader('X-Kilolock-Slice-Instances', String(slice.instanceCount));
    await writeInTurns(res, slice.text());
  }

  /** A state-engine write: an apply run on lane `state-engine`, its reservations all or nothing. */
  @Post('states/*name/runs')
  @Access.state('write', stateInPath('name'))
  @Heavy('run')
  @HttpCode(201)
  @JsonBody({ what: 'state-engine run', limit: 'maxStateBytes', lossless: true })
  async start(
    @Param('name') param: string[],
    @Body() body: StartEngineRunDto,
    @Req() req: Request,
  ) {
    const name = stateNameFrom(param);
    const started = await this.commands
      .execute(
        new StartApplyRunCommand({
          name,
          ...(body.run_id === undefined ? {} : { runId: body.run_id.toLowerCase() }),
          baseVersion: body.base_version,
          reservations: [
            ...body.write.map((glob) => ({ glob, mode: 'write' as const })),
            ...(body.read ?? []).map((glob) => ({ glob, mode: 'read' as const })),
          ],
          leaseSeconds: body.lease_seconds ?? DEFAULT_LEASE_SECONDS,
          writeSet: body.write_set ?? body.write,
          readSet: body.read_set ?? body.read ?? [],
          info: { ...(body.info ?? {}), state_engine_operation: body.operation },
          lane: 'state-engine',
          caller: callerOf(req),
        }),
      )
      .catch((err: unknown) => {
        throw withWireDetails(err);
      });
    return { ...startedRunWire(started), operation: body.operation };
  }

  /** The delta commit: the apply runs' row-level commit, recorded with source `state-engine`. */
  @Post('states/*name/runs/:runId/commit')
  @Access.state('write', stateInPath('name'))
  @HttpCode(200)
  async commit(@Param('name') param: string[], @Param('runId') id: string, @Req() req: Request) {
    const name = stateNameFrom(param);
    const runId = runIdFrom(id);
    const raw = await readBody(req, this.config.maxStateBytes, 'commit');
    const change = parseCommit(jsonBody(raw), await sha256(raw));
    const { version, serial } = await this.commands
      .execute(new CommitApplyRunCommand({ name, runId, ...change, caller: callerOf(req) }))
      .catch((err: unknown) => {
        throw withWireDetails(err);
      });
    return { run_id: runId, version, serial };
  }

  /** Ends a write that did not commit (a dry run, a refusal): its reservations are released. */
  @Post('states/*name/runs/:runId/finish')
  @Access.state('write', stateInPath('name'))
  @HttpCode(200)
  async finish(@Param('name') param: string[], @Param('runId') id: string, @Req() req: Request) {
    const name = stateNameFrom(param);
    const runId = runIdFrom(id);
    const f = parseFinishApplyRun(jsonBody(await readBody(req, 64 * 1024, 'finish')));
    await this.commands.execute(
      new FinishApplyRunCommand({ name, runId, ...f, caller: callerOf(req) }),
    );
    return { run_id: runId, state: name, status: f.status };
  }

  /** Reads see every write acknowledged before them, on any replica. */
  private async caughtUp(): Promise<void> {
    await awaitReadModels(this.sync, await this.events.lastPosition(), () => 'read');
  }
}

function notFound(name: string): DomainError {
  return new DomainError(STATE_NOT_FOUND, `no state named "${name}"`);
}
