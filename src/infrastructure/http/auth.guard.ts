import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { DomainError } from '../../domain/shared/domain-error';
import type { Authenticator } from '../auth/authenticator';
import { OPEN } from '../auth/authenticator';
import {
  ACCESS_RULE,
  AccessRule,
  AUTH_FORBIDDEN,
  AuthedRequest,
  authorize,
  principalOf,
  requireScope,
  scopeList,
} from './access';

/**
 * Every route's access rule, checked before its handler: with
 * authentication on, the request's token must allow it (401 without a
 * valid token, 403 when its scopes do not reach); with it off, everything
 * is allowed, as before. A route that declares no rule is refused: a new
 * route is closed until someone decides who may use it.
 */
@Injectable()
export class AuthGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly authenticator: Authenticator | null,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const rule = this.reflector.getAllAndOverride<AccessRule | undefined>(ACCESS_RULE, [
      context.getHandler(),
      context.getClass(),
    ]);
    if (rule === undefined) {
      throw new Error(
        `${context.getClass().name}.${context.getHandler().name} declares no access rule (@Access)`,
      );
    }
    await admit(this.authenticator, context.switchToHttp().getRequest<AuthedRequest>(), rule);
    return true;
  }
}

/**
 * A request against its route's access rule: authenticated (once: a request
 * passed on to another route, POST <name>/refresh, is checked again, not
 * re-authenticated), then refused (401, 403) unless the token allows it.
 * The AuthGuard's check, and the current document's route's
 * (current-document-route.ts), which runs before Nest's pipeline.
 */
export async function admit(
  authenticator: Authenticator | null,
  req: AuthedRequest,
  rule: AccessRule,
): Promise<void> {
  if (rule.kind === 'public') return;
  req.principal ??= authenticator ? await authenticator.authenticate(req) : OPEN;
  switch (rule.kind) {
    case 'scope':
      requireScope(req, rule.scope, `${req.method} ${req.path}`);
      return;
    case 'state':
      authorize(req, rule.access, rule.stateOf(req));
      return;
    case 'anyState': {
      const p = principalOf(req);
      if (!p.grants.canAny(rule.access)) {
        throw new DomainError(
          AUTH_FORBIDDEN,
          `token "${p.name}" may not ${rule.access} any state (its scopes: ${scopeList(p)})`,
        );
      }
      return;
    }
  }
}
