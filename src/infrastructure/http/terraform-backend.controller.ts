import {
  Controller,
  Delete,
  Get,
  Inject,
  Lock,
  Next,
  Param,
  Post,
  Query,
  Req,
  Res,
  Unlock,
} from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import type { NextFunction, Request, Response } from 'express';
import {
  CommitStateCommand,
  DeleteStateCommand,
  LockStateCommand,
  UnlockStateCommand,
} from '../../application/state/state-commands';
import { QUOTA_EXCEEDED } from '../../domain/quota';
import { DocumentTextMemo } from '../../application/state/document-text-memo';
import { DomainError } from '../../domain/shared/domain-error';
import {
  parseLockInfo,
  STATE_LOCK_MISMATCH,
  STATE_LOCKED,
  STATE_NOT_FOUND,
  stateStreamId,
} from '../../domain/state';
import { CONFIG, type Config } from '../config/config';
import { StateCatalogReadModel } from '../read-models/state-catalog-read-model';
import { StateDocumentReadModel } from '../read-models/state-document-read-model';
import { Access, requireScope } from './access';
import { Described } from './api-description';
import { callerOf } from './caller';
import { CallerBounds, holdHeavy } from './caller-bounds';
import { sendDocument } from './current-document-route';
import { parseJson, readBody } from './read-body';
import { receiveStateDocument } from './receive-state-document';
import { MAX_VERSION } from './request-validation';
import { lockIdFrom } from './lock-id-param';
import { namesAnAction, stateNameFrom } from './state-name';

type Req_ = Request & { id?: string };

/** The state a backend route names; `<name>/refresh` names <name> (passed on to refresh). */
function backendState(req: Request): string {
  const param = req.params.name as unknown as string[];
  return stateNameFrom(namesAnAction(param) ? param.slice(0, -1) : param);
}

/**
 * Terraform's stock `http` backend: GET/POST/DELETE the document, LOCK and
 * UNLOCK it. Lock conflicts answer with the holder's LockInfo as the body,
 * because that is what terraform reads and prints; every other refusal is our
 * JSON error.
 */
const STATE_DOCUMENT: SchemaObject = {
  type: 'object',
  description: 'a Terraform state document (format version 4), kept byte for byte',
  additionalProperties: true,
};
const LOCK_INFO: SchemaObject = {
  type: 'object',
  description: "Terraform's LockInfo; ID is the lock's identity, every member is kept",
  required: ['ID'],
  properties: {
    ID: { type: 'string' },
    Operation: { type: 'string' },
    Info: { type: 'string' },
    Who: { type: 'string' },
    Version: { type: 'string' },
    Created: { type: 'string' },
    Path: { type: 'string' },
  },
  additionalProperties: true,
};
const HOLDER = { description: "the holder's LockInfo", schema: LOCK_INFO };

@Described.tags('terraform backend')
@Controller()
export class TerraformBackendController {
  constructor(
    private readonly commands: CommandBus,
    private readonly documents: StateDocumentReadModel,
    private readonly catalog: StateCatalogReadModel,
    @Inject(CONFIG) private readonly config: Config,
    private readonly texts: DocumentTextMemo,
    private readonly bounds: CallerBounds,
  ) {}

  /**
   * The current document, or with `?serial=N` the newest version carrying
   * terraform serial N, or with `?version=N` our version N. The version
   * served is in `X-Kilolock-State-Version`. Terraform reads any 404 as "no
   * state yet" and ignores its body, so a 404 carries our JSON error too.
   * A current document that exists is served before this handler, by
   * CurrentDocumentRoute under this rule; the rest comes here.
   */
  @Described.operation({
    summary: 'The current document, or one version of it',
    query: [
      { name: 'version', required: false, description: 'our version N (1, 2, 3…)' },
      {
        name: 'serial',
        required: false,
        description: 'the newest version with terraform serial N',
      },
    ],
    responses: [
      {
        status: 200,
        description: 'the document; X-Kilolock-State-Version says which version',
        schema: STATE_DOCUMENT,
      },
    ],
  })
  @Get('v1/states/*name')
  @Access.state('read', backendState)
  async get(
    @Param('name') param: string[],
    @Query('serial') serialParam: unknown,
    @Query('version') versionParam: unknown,
    @Req() req: Req_,
    @Res() res: Response,
  ): Promise<void> {
    const name = stateNameFrom(param);
    const serial = integerParam(serialParam, 'serial');
    const version = integerParam(versionParam, 'version', MAX_VERSION);
    if (serial !== null && version !== null) {
      throw new DomainError('REQUEST.INVALID', 'give serial or version, not both');
    }
    // A past version is built for its request, as big as the state was: counted as an
    // export against its caller (terraform never asks for one; its GET is never refused).
    if (serial !== null || version !== null) holdHeavy(this.bounds, 'export', req, res);
    const served =
      serial !== null
        ? await this.documents.version(name, { serial })
        : version !== null
          ? await this.documents.version(name, { version })
          : await this.documents.currentBody(name);
    if (served === null) throw await this.missing(name, serial, version);
    await sendDocument(res, served);
  }

  /** Why there is nothing to serve: no such state, or no such version of it. */
  private async missing(
    name: string,
    serial: number | null,
    version: number | null,
  ): Promise<DomainError> {
    const live = await this.catalog.live(name);
    if (live === null) return new DomainError(STATE_NOT_FOUND, `no state named "${name}"`);
    const which =
      serial !== null
        ? `no version with serial ${serial}`
        : version !== null
          ? `no version ${version}`
          : 'no version yet';
    return new DomainError('VERSION.NOT_FOUND', `state "${name}" has ${which}`);
  }

  /**
   * `POST <name>/refresh` (any action word a state name may not end in)
   * belongs to another controller: it is passed on, so which module
   * registers its routes first does not matter.
   */
  @Described.operation({
    summary: 'Commit a new version (terraform apply, state push)',
    query: [{ name: 'ID', required: false, description: 'the lock ID the writer holds' }],
    body: { schema: STATE_DOCUMENT },
    responses: [
      { status: 200, description: 'stored' },
      { status: 423, ...HOLDER },
      { status: 409, ...HOLDER },
    ],
  })
  @Post('v1/states/*name')
  @Access.state('write', backendState)
  async post(
    @Param('name') param: string[],
    @Query('ID') lockIdParam: unknown,
    @Req() req: Req_,
    @Res() res: Response,
    @Next() next: NextFunction,
  ): Promise<void> {
    if (namesAnAction(param)) return next();
    const name = stateNameFrom(param);
    const lockId = lockIdFrom(lockIdParam, 'ID');
    const key = stateStreamId(name);
    const { document, checksum, bytes } = await receiveStateDocument(
      req,
      this.config.maxStateBytes,
      (body, decode) => this.texts.parse(key, body, decode),
      (size) => this.texts.bodyBuffer(key, size),
    );
    await this.answerLockConflicts(res, () =>
      this.commands.execute(
        new CommitStateCommand({
          name,
          document,
          checksum,
          bytes,
          lockId,
          source: 'http',
          caller: callerOf(req),
        }),
      ),
    );
    // Answered. Other readers GET right after a commit (a
    // terraform_remote_state, kl, a replica): make the document they will
    // read once this turn's I/O is done, not while the POST waits. Not
    // within a lock session, which may POST again and again (an apply):
    // its UNLOCK does it once (doUnlock).
    if (res.statusCode === 200 && lockId === null) {
      setImmediate(() => this.documents.refreshHeld(name).catch(() => undefined));
    }
  }

  @Described.operation({ summary: 'Delete the state (refused while locked; its history stays)' })
  @Delete('v1/states/*name')
  @Access.state('write', backendState)
  async delete(@Param('name') param: string[], @Req() req: Req_, @Res() res: Response) {
    const name = stateNameFrom(param);
    await this.answerLockConflicts(res, () =>
      this.commands.execute(new DeleteStateCommand({ name, caller: callerOf(req) })),
    );
  }

  @Described.operation({
    summary: 'LOCK: take the lock (terraform lock_method, default)',
    body: { schema: LOCK_INFO },
    responses: [
      { status: 200, description: 'locked by this LockInfo (also when it already held it)' },
      { status: 423, ...HOLDER },
    ],
  })
  @Lock('v1/states/*name')
  @Access.state('write', backendState)
  lock(@Param('name') param: string[], @Req() req: Req_, @Res() res: Response) {
    return this.doLock(param, req, res);
  }

  @Described.operation({
    summary: 'LOCK for proxies that drop custom methods (lock_method = "POST")',
    body: { schema: LOCK_INFO },
    responses: [
      { status: 200, description: 'locked' },
      { status: 423, ...HOLDER },
    ],
  })
  @Post('v1/state-lock/*name')
  @Access.state('write', backendState)
  lockAlias(@Param('name') param: string[], @Req() req: Req_, @Res() res: Response) {
    return this.doLock(param, req, res);
  }

  @Described.operation({
    summary: 'UNLOCK: release the lock (terraform unlock_method, default)',
    description:
      'A body with the LockInfo (or only its ID, as `tofu force-unlock` sends) releases that lock; ' +
      'an empty body (`terraform force-unlock`) releases whoever holds it.',
    body: { schema: LOCK_INFO, required: false },
    responses: [
      { status: 200, description: 'unlocked (also when it was not locked)' },
      { status: 409, ...HOLDER },
    ],
  })
  @Unlock('v1/states/*name')
  @Access.state('write', backendState)
  unlock(@Param('name') param: string[], @Req() req: Req_, @Res() res: Response) {
    return this.doUnlock(param, req, res);
  }

  @Described.operation({
    summary: 'UNLOCK for proxies that drop custom methods (unlock_method = "POST")',
    body: { schema: LOCK_INFO, required: false },
    responses: [
      { status: 200, description: 'unlocked' },
      { status: 409, ...HOLDER },
    ],
  })
  @Post('v1/state-unlock/*name')
  @Access.state('write', backendState)
  unlockAlias(@Param('name') param: string[], @Req() req: Req_, @Res() res: Response) {
    return this.doUnlock(param, req, res);
  }

  private async doLock(param: string[], req: Req_, res: Response): Promise<void> {
    const name = stateNameFrom(param);
    const body = await readBody(req, this.config.maxLockBytes, 'lock info');
    const info = parseLockInfo(parseJson(body, 'STATE.INVALID', 'lock info'));
    await this.answerLockConflicts(res, () =>
      this.commands.execute(new LockStateCommand({ name, lockInfo: info, caller: callerOf(req) })),
    );
  }

  private async doUnlock(param: string[], req: Req_, res: Response): Promise<void> {
    const name = stateNameFrom(param);
    const body = await readBody(req, this.config.maxLockBytes, 'lock info');
    // An empty body is `terraform force-unlock`: release whoever holds it.
    const lockId =
      body.toString('utf8').trim() === ''
        ? null
        : parseLockInfo(parseJson(body, 'STATE.INVALID', 'lock info')).ID;
    if (lockId === null) {
      requireScope(
        req,
        'admin',
        `terraform force-unlock (releasing state ${name}'s lock whoever holds it)`,
      );
    }
    await this.answerLockConflicts(res, () =>
      this.commands.execute(new UnlockStateCommand({ name, lockId, caller: callerOf(req) })),
    );
    // Answered. Terraform's next command on this state starts with a GET:
    // have the document it will read ready now, while nothing waits. A
    // failure here costs nothing: that GET reads (and reports) for itself.
    if (res.statusCode === 200) this.documents.refreshHeld(name).catch(() => undefined);
  }

  private async answerLockConflicts(res: Response, run: () => Promise<unknown>): Promise<void> {
    try {
      await run();
    } catch (err) {
      const holder = err instanceof DomainError ? err.metadata.holder : undefined;
      // A quota refusal is a LockInfo too: terraform prints its Who and Info.
      const code = (err as DomainError).code;
      if (holder && (code === STATE_LOCKED || code === QUOTA_EXCEEDED)) {
        res.status(423).json(holder);
        return;
      }
      if (holder && (err as DomainError).code === STATE_LOCK_MISMATCH) {
        res.status(409).json(holder);
        return;
      }
      throw err;
    }
    res.status(200).end();
  }
}

function integerParam(value: unknown, name: string, max = Number.MAX_SAFE_INTEGER): number | null {
  if (value === undefined) return null;
  if (typeof value !== 'string' || !/^\d{1,15}$/.test(value) || Number(value) > max) {
    throw new DomainError(
      'REQUEST.INVALID',
      `${name} must be an integer from 0 to ${max}, got ${JSON.stringify(value)}`,
    );
  }
  return Number(value);
}
