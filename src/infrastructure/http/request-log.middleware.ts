import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from '../logging/logger';

/** Gives every request an id (honouring X-Request-Id) and logs one line when it ends. */
export function requestLog(logger: Logger) {
  return (req: Request & { id?: string }, res: Response, next: NextFunction): void => {
    const header = req.header('x-request-id');
    const id = header && /^[\w.:-]{1,128}$/.test(header) ? header : randomUUID();
    req.id = id;
    res.setHeader('X-Request-Id', id);
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      logger.info(
        { requestId: id, method: req.method, path: req.originalUrl, status: res.statusCode, ms },
        'request',
      );
    });
    next();
  };
}
