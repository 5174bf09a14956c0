import { StreamableFile } from '@nestjs/common';
import { ExpressAdapter } from '@nestjs/platform-express';
import type { Response } from 'express';
import type { Logger } from '../logging/logger';
import { sendJson } from './json-pieces';

/**
 * Writes every JSON answer a handler returns with stringifyJson. Read models
 * hand back numbers a double cannot hold as marked strings (see
 * lossless-json); Express's res.json would send them as those strings, and a
 * plain number would already be rounded. Handlers that write the response
 * themselves (`@Res()` without passthrough) never reach `reply`.
 *
 * Here, where Nest sends what a handler returned, rather than in a global
 * interceptor: an interceptor puts every request of every route through
 * rxjs, the GET of a state document included, which returns nothing
 * (docs/performance-history.md, "GET current at 1,000 instances (wave 17)").
 * A big answer (a query's rows, a long listing) is written a piece per turn.
 */
export class LosslessJsonExpressAdapter extends ExpressAdapter {
  /** `logger`: says why a big answer was cut off after it began (sendJson). */
  constructor(private readonly cutOffLog: Logger) {
    super();
  }

  override reply(response: Response, body: unknown, statusCode?: number): unknown {
    if (
      body === null ||
      typeof body !== 'object' ||
      Buffer.isBuffer(body) ||
      body instanceof StreamableFile ||
      response.headersSent
    ) {
      return super.reply(response, body, statusCode);
    }
    if (statusCode !== undefined) response.status(statusCode);
    sendJson(response, body, true, this.cutOffLog);
    return undefined;
  }
}
