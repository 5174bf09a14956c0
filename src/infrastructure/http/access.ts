import { SetMetadata } from '@nestjs/common';
import type { Request } from 'express';
import { globToLike, Grants, PlainScope, StateAccess } from '../../domain/auth';
import { DomainError } from '../../domain/shared/domain-error';
import { stateNameFrom } from './state-name';

export const AUTH_UNAUTHENTICATED = 'AUTH.UNAUTHENTICATED';
export const AUTH_FORBIDDEN = 'AUTH.FORBIDDEN';

/** Who a request is, once authenticated. */
export interface Principal {
  /** The token's name; null when authentication is off. */
  name: string | null;
  /** The basic-auth username sent with the token (free-form, recorded). */
  username: string | null;
  grants: Grants;
}

export type AuthedRequest = Request & { id?: string; principal?: Principal };

/**
 * What a route needs. Every route declares one (the guard refuses a route
 * that does not): `state` names the state from the request before the
 * handler runs; `anyState` lets in a token with any such scope and leaves
 * the handler to check (`authorize`) or filter by the state it reads.
 */
export type AccessRule =
  | { kind: 'public' }
  | { kind: 'scope'; scope: PlainScope }
  | { kind: 'state'; access: StateAccess; stateOf: (req: Request) => string }
  | { kind: 'anyState'; access: StateAccess };

export const ACCESS_RULE = 'kilolock:access';

/** The rule a handler declares with `@Access` (the guard reads the same); throws when it declares none. */
export function accessRuleOf(handler: (...args: never[]) => unknown): AccessRule {
  const rule = Reflect.getMetadata(ACCESS_RULE, handler) as AccessRule | undefined;
  if (rule === undefined) throw new Error(`${handler.name} declares no access rule (@Access)`);
  return rule;
}

export const Access = {
  public: () => SetMetadata(ACCESS_RULE, { kind: 'public' } satisfies AccessRule),
  admin: () => SetMetadata(ACCESS_RULE, { kind: 'scope', scope: 'admin' } satisfies AccessRule),
  query: () => SetMetadata(ACCESS_RULE, { kind: 'scope', scope: 'query' } satisfies AccessRule),
  events: () => SetMetadata(ACCESS_RULE, { kind: 'scope', scope: 'events' } satisfies AccessRule),
  metrics: () => SetMetadata(ACCESS_RULE, { kind: 'scope', scope: 'metrics' } satisfies AccessRule),
  state: (access: StateAccess, stateOf: (req: Request) => string) =>
    SetMetadata(ACCESS_RULE, { kind: 'state', access, stateOf } satisfies AccessRule),
  anyState: (access: StateAccess) =>
    SetMetadata(ACCESS_RULE, { kind: 'anyState', access } satisfies AccessRule),
};

/** The request's principal; the guard set it before any handler ran. */
export function principalOf(req: Request): Principal {
  const principal = (req as AuthedRequest).principal;
  if (!principal) throw new Error('no principal on the request: the AuthGuard did not run');
  return principal;
}

function who(p: Principal): string {
  return p.name === null ? 'this request' : `token "${p.name}"`;
}

/** Refuses (403) unless the request's token may `access` the state. */
export function authorize(req: Request, access: StateAccess, state: string): void {
  const p = principalOf(req);
  if (!p.grants.can(access, state)) {
    throw new DomainError(
      AUTH_FORBIDDEN,
      `${who(p)} may not ${access} state ${state} (its scopes: ${scopeList(p)})`,
    );
  }
}

/**
 * For what a caller names by its own id (a run), not by its state: a token
 * that may not read the state is refused as if the id named nothing
 * (`notFound`), so an id it came by tells it neither the state's name nor
 * that the run exists; one that may read but not `access` it gets the 403.
 */
export function authorizeFoundById(
  req: Request,
  access: StateAccess,
  state: string,
  notFound: () => DomainError,
): void {
  if (!principalOf(req).grants.can('read', state)) throw notFound();
  authorize(req, access, state);
}

/** Refuses (403) unless the request's token has `scope`; `what` says what needed it. */
export function requireScope(req: Request, scope: PlainScope, what: string) {
  requirePrincipalScope(principalOf(req), scope, what);
}

/** The same for a principal authenticated elsewhere (a gRPC call). */
export function requirePrincipalScope(p: Principal, scope: PlainScope, what: string): void {
  if (!p.grants.has(scope)) {
    throw new DomainError(
      AUTH_FORBIDDEN,
      `${what} needs the ${scope} scope; ${who(p)} has ${scopeList(p)}`,
    );
  }
}

export function scopeList(p: Principal): string {
  const list = p.grants.scopes.map((s) =>
    s.kind === 'read' || s.kind === 'write' ? `${s.kind}:${s.glob}` : s.kind,
  );
  return list.length ? list.join(' ') : 'none';
}

/** LIKE patterns of the states the request may read, for a list; null when it may read all. */
export function readablePatterns(req: Request): string[] | null {
  const grants = principalOf(req).grants;
  return grants.unrestricted ? null : grants.globs('read').map(globToLike);
}

/** `?state=<name>`, for a route's access rule (given once, or the request is refused). */
export function stateInQuery(req: Request): string {
  const state = req.query.state;
  if (typeof state !== 'string') {
    throw new DomainError('REQUEST.INVALID', 'state must be given once, as a state name');
  }
  return stateNameFrom(state);
}

/** The state named by a wildcard route parameter (`states/*name/…`). */
export function stateInPath(param: string): (req: Request) => string {
  return (req) => stateNameFrom(req.params[param] as unknown as string[]);
}
