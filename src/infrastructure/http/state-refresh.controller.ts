import { Controller, HttpCode, Param, Post, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import { toWire } from '../../application/refresh/refresh-report';
import { DomainError } from '../../domain/shared/domain-error';
import { ServerRefreshService } from '../refresh/server-refresh.service';
import { callerOf } from './caller';
import { readBody } from './read-body';
import { jsonBody } from './refresh-requests';
import { stateNameFrom } from './state-name';

/**
 * `POST /v1/states/<name>/refresh`: a refresh run on the kld host. It shares
 * its path prefix with terraform's `POST /v1/states/<name>`, whose handler
 * passes a path ending in `/refresh` on to this one (state names may not end
 * in `refresh`, so nothing else is shadowed). The run lasts as long as the
 * request: a client that hangs up cancels it.
 */
@Controller()
export class StateRefreshController {
  constructor(private readonly refresh: ServerRefreshService) {}

  @Post('v1/states/*name/refresh')
  @HttpCode(200)
  async run(
    @Param('name') param: string[],
    @Req() req: Request & { id?: string },
    @Res({ passthrough: true }) res: Response,
  ) {
    const name = stateNameFrom(param);
    const raw = await readBody(req, 64 * 1024);
    const body = raw.toString('utf8').trim() === '' ? {} : jsonBody(raw);
    const dryRun = body.dry_run ?? false;
    if (typeof dryRun !== 'boolean') {
      throw new DomainError('REQUEST.INVALID', 'dry_run must be a boolean');
    }
    const hangUp = new AbortController();
    // 'close' on the response before it finished: the client went away.
    const onClose = () => {
      if (!res.writableFinished) hangUp.abort();
    };
    res.on('close', onClose);
    try {
      return toWire(await this.refresh.run(name, { dryRun, caller: callerOf(req) }, hangUp.signal));
    } finally {
      res.off('close', onClose);
    }
  }
}
