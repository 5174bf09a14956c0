import { ArgumentsHost, Catch, ExceptionFilter, HttpException } from '@nestjs/common';
import type { Request, Response } from 'express';
import { DomainError } from '../../domain/shared/domain-error';
import type { Logger } from '../logging/logger';

/** Stable error codes → HTTP status. Anything unlisted in a family gets its default. */
const STATUS_BY_CODE: Record<string, number> = {
  'STATE.NOT_FOUND': 404,
  'STATE.LOCKED': 423,
  'STATE.LOCK_MISMATCH': 409,
  'STATE.INVALID': 400,
  'STATE.TOO_LARGE': 413,
  'EVENTS.WRONG_EXPECTED_REVISION': 409,
  'EVENTS.EVENT_ID_CONFLICT': 409,
  'PROJECTIONS.REBUILD_RUNNING': 409,
  'REQUEST.INVALID': 400,
  'REQUEST.TOO_LARGE': 413,
  'REQUEST.NOT_FOUND': 404,
  'REQUEST.FORBIDDEN_ORIGIN': 403,
  'REQUEST.FORBIDDEN_HOST': 403,
  'REQUEST.UNSUPPORTED_MEDIA_TYPE': 415,
  'QUERY.INVALID': 400,
  'QUERY.TIMEOUT': 400,
  // 400, not 403: the caller is allowed to query; this SQL touched what no query may.
  'QUERY.FORBIDDEN': 400,
  'SERVER.UNAVAILABLE': 503,
  // The write is stored; the read models do not show it yet (a retry is safe).
  'SERVER.LAGGING': 503,
  // A rebuild met an event a projector cannot apply (docs/operations.md).
  'PROJECTIONS.CANNOT_APPLY': 409,
  'STATE.VERSION_CONFLICT': 409,
  'STATE.LINEAGE_CONFLICT': 409,
  'STATE.SERIAL_CONFLICT': 409,
  'REFRESH.ALREADY_STARTED': 409,
  'REFRESH.FINISHED': 409,
  'REFRESH.STATE_CHANGED': 409,
  'REFRESH.LOCKED': 423,
  // The server's policy, not the caller's request, forbids reading that variable.
  'REFRESH.CONFIG_ENV_REFUSED': 403,
};

export function statusFor(code: string): number {
  return STATUS_BY_CODE[code] ?? (code.endsWith('.NOT_FOUND') ? 404 : 400);
}

export function errorBody(
  code: string,
  message: string,
): { error: { code: string; message: string } } {
  return { error: { code, message } };
}

/**
 * The single place errors become responses: `{error:{code,message}}`, never a
 * stack trace. Unexpected errors are logged with their stack and answered 500.
 */
@Catch()
export class ErrorFilter implements ExceptionFilter {
  constructor(private readonly logger: Logger) {}

  catch(err: unknown, host: ArgumentsHost): void {
    const ctx = host.switchToHttp();
    const res = ctx.getResponse<Response>();
    const req = ctx.getRequest<Request & { id?: string }>();
    if (res.headersSent) return;
    if (err instanceof DomainError) {
      const status = statusFor(err.code);
      // Clients retry a 503 (terraform does, with the same request): not at once.
      if (status === 503) res.setHeader('Retry-After', '1');
      res.status(status).json(errorBody(err.code, err.message));
      return;
    }
    if (err instanceof HttpException) {
      const status = err.getStatus();
      const code =
        status === 404
          ? 'REQUEST.NOT_FOUND'
          : status === 413
            ? 'REQUEST.TOO_LARGE'
            : status < 500
              ? 'REQUEST.INVALID'
              : 'SERVER.ERROR';
      res.status(status).json(errorBody(code, httpMessage(err)));
      return;
    }
    const bodyError = err as { type?: string; status?: number; message?: string };
    if (bodyError?.type === 'entity.too.large') {
      res.status(413).json(errorBody('REQUEST.TOO_LARGE', 'request body is too large'));
      return;
    }
    if (bodyError?.type === 'entity.parse.failed') {
      res.status(400).json(errorBody('REQUEST.INVALID', 'request body is not valid JSON'));
      return;
    }
    this.logger.error({ err, requestId: req?.id }, 'unhandled error');
    res
      .status(500)
      .json(errorBody('SERVER.ERROR', `internal error (request id ${req?.id ?? 'unknown'})`));
  }
}

function httpMessage(err: HttpException): string {
  const body = err.getResponse();
  if (typeof body === 'string') return body;
  const message = (body as { message?: unknown }).message;
  if (Array.isArray(message)) return message.join('; ');
  return typeof message === 'string' ? message : err.message;
}
