import { Body, Controller, HttpCode, Param, Post, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import { toWire } from '../../application/refresh/refresh-report';
import { ServerRefreshService } from '../refresh/server-refresh.service';
import { callerOf } from './caller';
import { StateRefreshDto } from './dto/refresh-run.dto';
import { JsonBody } from './json-body';
import { stateNameFrom } from './state-name';
import { Access } from './access';
import { Heavy } from './caller-bounds';

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
  @Access.state('write', (req) => stateNameFrom(req.params.name as unknown as string[]))
  @Heavy('run')
  @HttpCode(200)
  @JsonBody({ what: 'refresh request', limit: 64 * 1024, lossless: true, emptyIsObject: true })
  async run(
    @Param('name') param: string[],
    @Body() body: StateRefreshDto,
    @Req() req: Request & { id?: string },
    @Res({ passthrough: true }) res: Response,
  ) {
    const name = stateNameFrom(param);
    const dryRun = body.dry_run ?? false;
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
