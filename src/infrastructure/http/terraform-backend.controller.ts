import { webcrypto } from 'node:crypto';
import {
  Controller,
  Delete,
  Get,
  Inject,
  Lock,
  Param,
  Post,
  Query,
  Req,
  Res,
  Unlock,
} from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import type { Request, Response } from 'express';
import {
  CommitStateCommand,
  DeleteStateCommand,
  LockStateCommand,
  UnlockStateCommand,
} from '../../application/state/state-commands';
import { DomainError } from '../../domain/shared/domain-error';
import { parseLockInfo, STATE_LOCK_MISMATCH, STATE_LOCKED } from '../../domain/state';
import { parseStateDocument } from '../../domain/terraform';
import { CONFIG } from '../../app/tokens';
import type { Config } from '../config/config';
import { contentMd5 } from '../../projections/state/state-document-text';
import { StateReadModel } from '../read-models/state-read-model';
import { callerOf } from './caller';
import { parseJson, readBody } from './read-body';
import { stateNameFrom } from './state-name';

type Req_ = Request & { id?: string };

/**
 * Terraform's stock `http` backend: GET/POST/DELETE the document, LOCK and
 * UNLOCK it. Lock conflicts answer with the holder's LockInfo as the body,
 * because that is what terraform reads and prints; every other refusal is our
 * JSON error.
 */
@Controller()
export class TerraformBackendController {
  constructor(
    private readonly commands: CommandBus,
    private readonly states: StateReadModel,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  @Get('v1/states/*name')
  async get(
    @Param('name') param: string[],
    @Query('serial') serial: string | undefined,
    @Res() res: Response,
  ): Promise<void> {
    const name = stateNameFrom(param);
    let served: { body: Buffer; md5: string } | null;
    if (serial !== undefined) {
      if (!/^\d{1,15}$/.test(serial)) {
        throw new DomainError(
          'REQUEST.INVALID',
          `serial must be a non-negative integer, got "${serial}"`,
        );
      }
      const document = await this.states.atSerial(name, Number(serial));
      const body = document === null ? null : Buffer.from(document, 'utf8');
      served = body === null ? null : { body, md5: contentMd5(body) };
    } else {
      served = await this.states.currentBody(name);
    }
    if (served === null) {
      res.status(404).end();
      return;
    }
    res
      .status(200)
      .setHeader('Content-Type', 'application/json')
      .setHeader('Content-MD5', served.md5)
      .end(served.body);
  }

  @Post('v1/states/*name')
  async post(
    @Param('name') param: string[],
    @Query('ID') lockId: string | undefined,
    @Req() req: Req_,
    @Res() res: Response,
  ): Promise<void> {
    const name = stateNameFrom(param);
    const body = await readBody(req, this.config.maxStateBytes, 'state');
    // Web Crypto hashes on the thread pool while the document is parsed here.
    const [checksum, document] = await Promise.all([
      webcrypto.subtle.digest('SHA-256', body).then((d) => Buffer.from(d).toString('hex')),
      (async () => parseStateDocument(body.toString('utf8')))(),
    ]);
    await this.answerLockConflicts(res, () =>
      this.commands.execute(
        new CommitStateCommand(name, document, checksum, lockId || null, 'http', callerOf(req)),
      ),
    );
  }

  @Delete('v1/states/*name')
  async delete(@Param('name') param: string[], @Req() req: Req_, @Res() res: Response) {
    const name = stateNameFrom(param);
    await this.answerLockConflicts(res, () =>
      this.commands.execute(new DeleteStateCommand(name, callerOf(req))),
    );
  }

  @Lock('v1/states/*name')
  lock(@Param('name') param: string[], @Req() req: Req_, @Res() res: Response) {
    return this.doLock(param, req, res);
  }

  @Post('v1/state-lock/*name')
  lockAlias(@Param('name') param: string[], @Req() req: Req_, @Res() res: Response) {
    return this.doLock(param, req, res);
  }

  @Unlock('v1/states/*name')
  unlock(@Param('name') param: string[], @Req() req: Req_, @Res() res: Response) {
    return this.doUnlock(param, req, res);
  }

  @Post('v1/state-unlock/*name')
  unlockAlias(@Param('name') param: string[], @Req() req: Req_, @Res() res: Response) {
    return this.doUnlock(param, req, res);
  }

  private async doLock(param: string[], req: Req_, res: Response): Promise<void> {
    const name = stateNameFrom(param);
    const body = await readBody(req, this.config.maxLockBytes, 'lock info');
    const info = parseLockInfo(parseJson(body, 'STATE.INVALID', 'lock info'));
    await this.answerLockConflicts(res, () =>
      this.commands.execute(new LockStateCommand(name, info, callerOf(req))),
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
    await this.answerLockConflicts(res, () =>
      this.commands.execute(new UnlockStateCommand(name, lockId, callerOf(req))),
    );
  }

  private async answerLockConflicts(res: Response, run: () => Promise<unknown>): Promise<void> {
    try {
      await run();
    } catch (err) {
      const holder = err instanceof DomainError ? err.metadata.holder : undefined;
      if (holder && (err as DomainError).code === STATE_LOCKED) {
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
