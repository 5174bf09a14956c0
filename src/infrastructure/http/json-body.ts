import {
  applyDecorators,
  CallHandler,
  ExecutionContext,
  Inject,
  Injectable,
  NestInterceptor,
  SetMetadata,
  UseInterceptors,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { Request } from 'express';
import { from, Observable, switchMap } from 'rxjs';
import { isJsonObject, JsonLimitError, parseJsonLossless } from '../../domain/terraform';
import { DomainError } from '../../domain/shared/domain-error';
import { CONFIG, type Config } from '../config/config';
import { limitError, parseJson, readBody, utf8Text } from './read-body';

export interface JsonBodyOptions {
  /** Names the body in refusals ("provider config exceeds the limit…"). */
  what: string;
  /** Largest body in bytes, or the Config limit that bounds it. */
  limit: number | 'maxStateBytes' | 'maxLockBytes';
  /** Numbers beyond double precision kept exact (a body that carries a state document or a config). */
  lossless?: boolean;
  /** An empty body is `{}`. */
  emptyIsObject?: boolean;
}

const JSON_BODY = Symbol('JsonBody');

/**
 * The route takes a JSON object as its body, read here rather than by a
 * global body parser so each route has its own limit (a 413 before the body
 * is buffered whole) and the Terraform routes keep their raw bytes. The
 * parsed object becomes `@Body()`, which the ValidationPipe checks against
 * the route's DTO.
 */
export function JsonBody(options: JsonBodyOptions): MethodDecorator {
  return applyDecorators(SetMetadata(JSON_BODY, options), UseInterceptors(JsonBodyInterceptor));
}

@Injectable()
export class JsonBodyInterceptor implements NestInterceptor {
  constructor(
    private readonly reflector: Reflector,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const options = this.reflector.get<JsonBodyOptions>(JSON_BODY, context.getHandler());
    const req = context.switchToHttp().getRequest<Request>();
    return from(this.read(req, options)).pipe(
      switchMap((body) => {
        req.body = body;
        return next.handle();
      }),
    );
  }

  private async read(req: Request, options: JsonBodyOptions): Promise<unknown> {
    const limit = typeof options.limit === 'number' ? options.limit : this.config[options.limit];
    const raw = await readBody(req, limit, options.what);
    if (options.emptyIsObject && raw.toString('utf8').trim() === '') return {};
    const body = options.lossless
      ? losslessJson(raw, options.what)
      : parseJson(raw, 'REQUEST.INVALID', options.what);
    if (!isJsonObject(body)) {
      throw new DomainError('REQUEST.INVALID', `${options.what} must be a JSON object`);
    }
    return body;
  }
}

function losslessJson(raw: Buffer, what: string): unknown {
  const text = utf8Text(raw, 'REQUEST.INVALID', what);
  try {
    return parseJsonLossless(text);
  } catch (err) {
    if (err instanceof JsonLimitError) throw limitError('REQUEST.INVALID', what, err);
    throw new DomainError(
      'REQUEST.INVALID',
      `${what} is not valid JSON: ${(err as Error).message}`,
    );
  }
}
