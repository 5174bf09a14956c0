import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from '../logging/logger';
import { redactUrls } from '../logging/redact';

/**
 * Gives every request an id (honouring X-Request-Id) and logs one line when
 * it ends: answered, or given up by its client before the answer went out
 * (`request aborted`: an upload cut short, a client that stopped waiting),
 * which would otherwise leave no trace.
 */
export function requestLog(logger: Logger) {
  return (req: Request & { id?: string }, res: Response, next: NextFunction): void => {
    const header = req.header('x-request-id');
    const id = header && /^[\w.:-]{1,128}$/.test(header) ? header : randomUUID();
    req.id = id;
    res.setHeader('X-Request-Id', id);
    const started = process.hrtime.bigint();
    // 'close' ends every response, after 'finish' when the answer went out
    // whole: one listener, and one line per request.
    res.once('close', () => {
      logger.info(
        {
          requestId: id,
          method: req.method,
          // A client may put a token (or a password) in the URL: never written to the log.
          path: redactUrls(req.originalUrl),
          status: res.statusCode,
          ms: Number(process.hrtime.bigint() - started) / 1e6,
        },
        res.writableFinished ? 'request' : 'request aborted',
      );
    });
    next();
  };
}
