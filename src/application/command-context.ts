import type { CommandContext } from '../domain/shared/event';
import type { Clock } from './ports/clock.port';

/** Who is asking and as part of what; the transport knows, the handler adds the time. */
export interface Caller {
  actor: string;
  correlationId: string;
}

export function commandContext(caller: Caller, clock: Clock): CommandContext {
  return {
    actor: caller.actor,
    correlationId: caller.correlationId,
    causationId: null,
    now: clock.now().toISOString(),
  };
}
