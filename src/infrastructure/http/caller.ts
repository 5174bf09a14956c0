import type { Request } from 'express';
import type { Caller } from '../../application/state/state-commands';
import { DomainError } from '../../domain/shared/domain-error';
import { textProblem } from '../../domain/shared/storable-text';

const MAX_ACTOR = 200;

/**
 * Who is calling. Terraform's http backend sends its configured username as
 * HTTP basic auth, the CLI sends X-Kilolock-Actor; anything else is anonymous.
 */
export function callerOf(req: Request & { id?: string }): Caller {
  return { actor: actorOf(req), correlationId: req.id ?? 'unknown' };
}

function actorOf(req: Request): string {
  const auth = req.header('authorization');
  if (auth?.startsWith('Basic ')) {
    const user = Buffer.from(auth.slice(6), 'base64').toString('utf8').split(':')[0];
    if (user) return checkActor(user, 'the basic auth username');
  }
  const header = req.header('x-kilolock-actor');
  return header && header.length <= MAX_ACTOR
    ? checkActor(header, 'X-Kilolock-Actor')
    : 'anonymous';
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
