import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { ROUTE_ARGS_METADATA } from '@nestjs/common/constants';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum';
import { Reflector } from '@nestjs/core';
import type { Request } from 'express';
import { DomainError } from '../../domain/shared/domain-error';
import { ACCESS_RULE, AccessRule } from './access';

/**
 * The query parameters a handler takes, read from its own parameter
 * decorators, so a new route is covered without declaring anything twice:
 * a whole `@Query()` DTO is the ValidationPipe's to check (it refuses
 * unknown members); otherwise the names of its `@Query('name')` parameters,
 * none when it has none. `untyped`: a whole `@Query()` with no DTO class,
 * which would read any name unchecked (passed-over-input.spec.ts keeps
 * every controller free of it).
 */
export type QueryParametersTaken =
  { kind: 'dto' } | { kind: 'untyped' } | { kind: 'names'; names: readonly string[] };

type Handler = (...args: never[]) => unknown;

export function queryParametersTaken(controller: object, handler: Handler): QueryParametersTaken {
  const args = (Reflect.getMetadata(ROUTE_ARGS_METADATA, controller, handler.name) ?? {}) as Record<
    string,
    { index: number; data?: unknown }
  >;
  const types = (Reflect.getMetadata(
    'design:paramtypes',
    (controller as { prototype: object }).prototype,
    handler.name,
  ) ?? []) as unknown[];
  const names: string[] = [];
  for (const [key, arg] of Object.entries(args)) {
    if (key.split(':')[0] !== String(RouteParamtypes.QUERY)) continue;
    if (typeof arg.data === 'string') {
      names.push(arg.data);
      continue;
    }
    const type = types[arg.index];
    return typeof type === 'function' && type !== Object ? { kind: 'dto' } : { kind: 'untyped' };
  }
  return { kind: 'names', names: names.sort() };
}

/** Methods whose routes read no body (passed-over-input.spec.ts keeps it so). */
const BODILESS = new Set(['GET', 'HEAD', 'DELETE']);

/** The request announces a body (a chunked one, or a length above 0). */
export function carriesBody(req: Request): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * Refuses (`400 REQUEST.INVALID`) input a route would pass over: a query
 * parameter it does not take, or a body sent with a `GET` or `DELETE`. A
 * caller may have meant it to narrow what the route does: before wave 25 a
 * force-unlock's `?lock_id=` released whoever's lock it found; before wave
 * 26 `DELETE /v1/states/<name>?version=1` deleted the whole state,
 * `DELETE /v1/admin/tokens/<name>?dry_run=true` revoked the token, and
 * `DELETE /v1/provider-configs?state=…` with `{"alias": "west"}` as its body
 * removed the state's default config. Runs after the AuthGuard, so a caller
 * without a valid token learns nothing from it, and before the
 * CallerBoundGuard, so a refused request takes no turn. Public routes
 * (health probes, the dashboard's files) take whatever a load balancer or a
 * browser adds (cache busters): they do nothing input could narrow.
 */
@Injectable()
export class PassedOverInputGuard implements CanActivate {
  private readonly taken = new WeakMap<Handler, QueryParametersTaken>();

  constructor(private readonly reflector: Reflector) {}

  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<Request>();
    const given = Object.keys((req.query ?? {}) as object);
    const body = BODILESS.has(req.method) && carriesBody(req);
    if (given.length === 0 && !body) return true;
    const rule = this.reflector.getAllAndOverride<AccessRule | undefined>(ACCESS_RULE, [
      context.getHandler(),
      context.getClass(),
    ]);
    if (rule?.kind === 'public') return true;
    const route = `${req.method} ${(req.route as { path?: string } | undefined)?.path ?? req.path}`;
    if (body) {
      throw new DomainError(
        'REQUEST.INVALID',
        `${route} takes no body: give what it takes in its path or query string`,
      );
    }
    const handler = context.getHandler() as Handler;
    let taken = this.taken.get(handler);
    if (taken === undefined) {
      taken = queryParametersTaken(context.getClass(), handler);
      this.taken.set(handler, taken);
    }
    if (taken.kind !== 'names') return true;
    const unknown = given.filter((name) => !taken.names.includes(name));
    if (unknown.length === 0) return true;
    const got = `got ${unknown
      .slice(0, 3)
      .map((n) => JSON.stringify(n.slice(0, 100)))
      .join(', ')}${unknown.length > 3 ? ` and ${unknown.length - 3} more` : ''}`;
    throw new DomainError(
      'REQUEST.INVALID',
      taken.names.length === 0
        ? `${route} takes no query parameters (${got})`
        : `${route} takes only the query parameter${taken.names.length > 1 ? 's' : ''} ${taken.names.join(', ')} (${got})`,
    );
  }
}
