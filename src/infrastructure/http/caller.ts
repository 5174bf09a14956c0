import type { Request } from 'express';
import type { Caller } from '../../application/state/state-commands';

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
    if (user) return user;
  }
  const header = req.header('x-kilolock-actor');
  return header && header.length <= 200 ? header : 'anonymous';
}
