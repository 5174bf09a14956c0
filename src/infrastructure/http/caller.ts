import type { Request } from 'express';
import type { Caller } from '../../application/state/state-commands';
import { DomainError } from '../../domain/shared/domain-error';
import { textProblem } from '../../domain/shared/storable-text';
import type { AuthedRequest } from './access';

const MAX_ACTOR = 200;

/**
 * Who is calling. With authentication on, the actor is the token's name
 * (with the basic-auth username terraform sends, if any); what the client
 * claims (X-Kilolock-Actor, or `claimed`) is only added as "on behalf of".
 * With it off, terraform's basic-auth username or kl's X-Kilolock-Actor is
 * taken as given, and anything else is anonymous.
 */
export function callerOf(req: Request & { id?: string }, claimed?: string | null): Caller {
  return { actor: actorOf(req, claimed ?? null), correlationId: req.id ?? 'unknown' };
}

function actorOf(req: Request, claimed: string | null): string {
  const principal = (req as AuthedRequest).principal;
  const header = req.header('x-kilolock-actor');
  const onBehalfOf = claimed ?? (header && header.length <= MAX_ACTOR ? header : null);
  if (principal && principal.name !== null) {
    const username = principal.username;
    const actor =
      principal.name +
      (username !== null && username !== principal.name ? ` (${username})` : '') +
      (onBehalfOf !== null && onBehalfOf !== principal.name && onBehalfOf !== username
        ? ` on behalf of ${onBehalfOf}`
        : '');
    return checkActor(actor.slice(0, MAX_ACTOR), 'the actor');
  }
  if (claimed) return checkActor(claimed, 'the actor');
  const auth = req.header('authorization');
  if (auth?.startsWith('Basic ')) {
    const user = Buffer.from(auth.slice(6), 'base64').toString('utf8').split(':')[0];
    if (user) return checkActor(user, 'the basic auth username');
  }
  return onBehalfOf !== null ? checkActor(onBehalfOf, 'X-Kilolock-Actor') : 'anonymous';
}

/**
 * The actor is written into every event's metadata (jsonb) and into text
 * columns, so it must be text PostgreSQL can hold; `what` names its source.
 */
export function checkActor(actor: string, what: string): string {
  if (actor.length > MAX_ACTOR) {
    throw new DomainError('REQUEST.INVALID', `${what} must be at most ${MAX_ACTOR} characters`);
  }
  const problem = textProblem(actor);
  if (problem !== null) throw new DomainError('REQUEST.INVALID', `${what} ${problem}`);
  return actor;
}
