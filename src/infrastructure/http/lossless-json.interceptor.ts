import {
  CallHandler,
  ExecutionContext,
  Injectable,
  NestInterceptor,
  StreamableFile,
} from '@nestjs/common';
import type { Response } from 'express';
import { map, Observable } from 'rxjs';
import { stringifyJson } from '../../domain/terraform/lossless-json';

/**
 * Writes every JSON answer with stringifyJson. Read models hand back numbers
 * a double cannot hold as marked strings (see lossless-json); Express's
 * res.json would send them as those strings, and a plain number would
 * already be rounded. Handlers that write the response themselves (`@Res()`
 * without passthrough) return nothing and are left alone.
 */
@Injectable()
export class LosslessJsonInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType() !== 'http') return next.handle();
    const res = context.switchToHttp().getResponse<Response>();
    return next.handle().pipe(
      map((body: unknown) => {
        if (
          body === null ||
          typeof body !== 'object' ||
          Buffer.isBuffer(body) ||
          body instanceof StreamableFile ||
          res.headersSent
        ) {
          return body;
        }
        if (!res.getHeader('Content-Type')) {
          res.setHeader('Content-Type', 'application/json; charset=utf-8');
        }
        return stringifyJson(body);
      }),
    );
  }
}
