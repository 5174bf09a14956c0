import { ArgumentsHost, Catch, ExceptionFilter, HttpException } from '@nestjs/common';
import type { Request, Response } from 'express';
import { DomainError } from '../../domain/shared/domain-error';
import type { ErrorCode } from '../../domain/shared/error-codes';
import type { Logger } from '../logging/logger';
import { isDatabaseUnavailable } from '../postgres/database-unavailable';
import { logAnswerCutOff } from './answer-cut-off';
import { statusFor } from './error-status';
import { sendJson } from './json-pieces';

/**
 * `details`: members a route adds to the error for clients to act on (the
 * holders of a conflict, the addresses of a stale plan), in wire form.
 */
export function errorBody(
  code: ErrorCode,
  message: string,
  details: Record<string, unknown> = {},
): { error: { code: ErrorCode; message: string } } {
  return { error: { ...details, code, message } };
}

/** A DomainError a route gave public details to (see errorBody). */
export function withDetails(err: DomainError, details: Record<string, unknown>): DomainError {
  return new DomainError(err.code, err.message, { ...err.metadata, details }, { cause: err });
}

function detailsOf(err: DomainError): Record<string, unknown> {
  const details = err.metadata.details;
  return details !== null && typeof details === 'object'
    ? (details as Record<string, unknown>)
    : {};
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
    this.reply(err, ctx.getRequest<Request & { id?: string }>(), ctx.getResponse<Response>());
  }

  /** The answer to `err`; also for a route served before Nest's pipeline (current-document-route.ts). */
  reply(err: unknown, req: (Request & { id?: string }) | undefined, res: Response): void {
    if (res.headersSent) {
      // Part of the answer is out and was cut off (writeInTurns).
      logAnswerCutOff(this.logger, err, req?.id);
      return;
    }
    if (err instanceof DomainError) {
      const status = statusFor(err.code);
      if (status !== null && status !== 500) {
        // Clients retry a 503 (terraform does, with the same request) and a 429: not at once.
        if (status === 503 || status === 429) res.setHeader('Retry-After', '1');
        // Terraform's http backend, curl and browsers answer a Basic challenge with credentials.
        if (status === 401) {
          res.setHeader('WWW-Authenticate', 'Basic realm="kilolock", charset="UTF-8"');
        }
        // Details can be long (a 409 naming 10,000 holders): written a piece per turn.
        sendJson(
          res.status(status),
          errorBody(err.code, err.message, detailsOf(err)),
          false,
          this.logger,
        );
        return;
      }
      // A code no answer may carry, or the server's own fault: as unexpected as a bug.
    } else if (err instanceof HttpException && err.getStatus() < 500) {
      // Nest's own refusals: a route that does not exist, a method it does not take.
      const status = err.getStatus();
      const code =
        status === 404
          ? 'REQUEST.NOT_FOUND'
          : status === 413
            ? 'REQUEST.TOO_LARGE'
            : 'REQUEST.INVALID';
      res.status(status).json(errorBody(code, httpMessage(err)));
      return;
    }
    if (isDatabaseUnavailable(err)) {
      // Not a bug, and not the caller's: the same request can succeed later.
      this.logger.warn(
        { err: { message: String((err as { message?: unknown }).message) }, requestId: req?.id },
        'database unavailable',
      );
      res.setHeader('Retry-After', '1');
      res
        .status(503)
        .json(
          errorBody('SERVER.UNAVAILABLE', 'the database cannot be reached now; retry the request'),
        );
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
