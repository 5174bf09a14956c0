import { CanActivate, ExecutionContext, SetMetadata } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { Request, Response } from 'express';
import { DomainError } from '../../domain/shared/domain-error';
import type { AuthedRequest, Principal } from './access';
import { callerOf } from './caller';
import {
  CALLER_LIMIT_VARIABLES,
  CallerLimits,
  DEFAULT_TOTAL_LIMITS,
  HeavyKind,
  TOTAL_LIMIT_VARIABLES,
} from './caller-limits';

const WHAT: Record<HeavyKind, string> = {
  query: 'queries (POST /v1/query)',
  export: 'exports (archives and past versions of a state)',
  subscription: 'event subscriptions',
  engine: 'state-engine requests',
  run: 'run starts and uploads',
};

const HEAVY_KIND = 'kilolock:heavy-kind';

/** Marks a route as one of the heavy kinds: the CallerBoundGuard counts it against its caller. */
export const Heavy = (kind: HeavyKind) => SetMetadata(HEAVY_KIND, kind);

/**
 * Counts each caller's requests in flight, per kind, and refuses one past
 * the bound at once. Written here because no library we keep fits: p-limit
 * and bottleneck queue the excess (a flood would then wait in kld's memory,
 * holding its sockets), and rate limiters (@nestjs/throttler) count
 * requests per time window, while what starves others is a few long ones
 * held open at the same time.
 */
export class CallerBounds {
  private readonly inFlight = new Map<string, number>();
  private readonly totals = new Map<HeavyKind, number>();

  constructor(
    readonly limits: CallerLimits,
    /** All callers together (KL_TOTAL_*). */
    readonly totalLimits: CallerLimits = DEFAULT_TOTAL_LIMITS,
  ) {}

  /**
   * A release (call it once), or which bound refused: `caller` already has
   * its bound of `kind` in flight, or all callers together have theirs.
   */
  tryAcquire(kind: HeavyKind, caller: string): (() => void) | 'caller' | 'total' {
    const key = `${kind}\0${caller}`;
    const held = this.inFlight.get(key) ?? 0;
    if (held >= this.limits[kind]) return 'caller';
    const total = this.totals.get(kind) ?? 0;
    if (total >= this.totalLimits[kind]) return 'total';
    this.inFlight.set(key, held + 1);
    this.totals.set(kind, total + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const now = (this.inFlight.get(key) ?? 1) - 1;
      if (now === 0) this.inFlight.delete(key);
      else this.inFlight.set(key, now);
      this.totals.set(kind, (this.totals.get(kind) ?? 1) - 1);
    };
  }

  /** Requests of `kind` in flight for `caller`. */
  held(kind: HeavyKind, caller: string): number {
    return this.inFlight.get(`${kind}\0${caller}`) ?? 0;
  }
}

type BoundedRequest = AuthedRequest & { heavyKinds?: Set<HeavyKind> };

/**
 * Runs after the AuthGuard (the principal is known): a route marked
 * `@Heavy(kind)` takes one of its caller's slots of that kind until its
 * response ends or its client goes away; past the bound it is refused
 * (429 REQUEST.TOO_MANY, Retry-After) before its body is read. Any other
 * route passes at the cost of one metadata lookup.
 */
export class CallerBoundGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly bounds: CallerBounds,
  ) {}

  canActivate(context: ExecutionContext): boolean {
    const kind = this.reflector.get<HeavyKind | undefined>(HEAVY_KIND, context.getHandler());
    if (kind === undefined) return true;
    const http = context.switchToHttp();
    const req = http.getRequest<BoundedRequest>();
    // A request passed on to another route is guarded again: it holds one slot.
    if (req.heavyKinds?.has(kind)) return true;
    holdHeavy(this.bounds, kind, req, http.getResponse<Response>());
    (req.heavyKinds ??= new Set()).add(kind);
    return true;
  }
}

/**
 * One of the request's caller's slots of `kind`, held until its response
 * ends or its client goes away (429 past the bound, see acquireHeavy): what
 * the guard takes for a `@Heavy` route, and a route heavy only with some
 * parameters takes itself.
 */
export function holdHeavy(
  bounds: CallerBounds,
  kind: HeavyKind,
  req: Request,
  res: Response,
): void {
  const release = acquireHeavy(bounds, kind, callerKey(req));
  // 'close' comes once the answer was sent or the client went away, whichever is first;
  // a client gone while the AuthGuard looked its token up has had its 'close' already.
  res.once('close', release);
  if (res.closed) release();
}

/**
 * One of `caller`'s slots of `kind`, released by the function answered (call
 * it once); past the caller's or all callers' bound a 429 REQUEST.TOO_MANY
 * naming the bound and its variable. Every transport's heavy calls take
 * their slots here (HTTP routes through the guard, gRPC subscriptions).
 */
export function acquireHeavy(
  bounds: CallerBounds,
  kind: HeavyKind,
  caller: BoundCaller,
): () => void {
  const release = bounds.tryAcquire(kind, caller.key);
  if (release === 'caller') {
    const limit = bounds.limits[kind];
    const variable = CALLER_LIMIT_VARIABLES[kind];
    throw new DomainError(
      'REQUEST.TOO_MANY',
      `${caller.name} already has ${limit} ${WHAT[kind]} in flight, the most one caller may have at once (${variable}=${limit}); retry when one ends, or ask the operator to raise ${variable}`,
    );
  }
  if (release === 'total') {
    const limit = bounds.totalLimits[kind];
    const variable = TOTAL_LIMIT_VARIABLES[kind];
    throw new DomainError(
      'REQUEST.TOO_MANY',
      `this kld already has ${limit} ${WHAT[kind]} in flight from all callers, the most it serves at once (${variable}=${limit}); retry when one ends, or ask the operator to raise ${variable}`,
    );
  }
  return release;
}

/** Who a bound counts against, and how a refusal names it. */
export interface BoundCaller {
  key: string;
  name: string;
}

/**
 * The token with authentication on. With it off, nothing is proven, so the
 * actor the client names and its address (docs/security.md says what that
 * leaves open).
 */
export function boundCaller(
  principal: Principal | undefined,
  address: string,
  actor: () => string,
): BoundCaller {
  if (principal?.name != null) {
    return { key: `token ${principal.name}`, name: `token "${principal.name}"` };
  }
  const who = actor();
  return { key: `open ${address} ${who}`, name: `caller "${who}" from ${address}` };
}

function callerKey(req: Request): BoundCaller {
  return boundCaller((req as AuthedRequest).principal, req.socket.remoteAddress ?? 'unknown', () =>
    safeActor(req),
  );
}

function safeActor(req: Request): string {
  try {
    return callerOf(req).actor;
  } catch {
    // An actor kld would refuse anyway: counted with the anonymous callers of that address.
    return 'anonymous';
  }
}
