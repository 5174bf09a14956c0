import { DomainError } from '../../domain/shared/domain-error';
import type { LogPosition } from '../../domain/shared/event';

export const READ_MODEL_SYNC = Symbol('ReadModelSync');

/** Lets a command answer only once the read models include its events. */
export interface ReadModelSync {
  /**
   * Resolves once the read models include `position`. With `types` (the
   * types of the events the command appended, which end at `position`),
   * only the read models fed by those types need to: the others show the
   * command's events however far behind they are.
   */
  waitForPosition(position: LogPosition, types?: readonly string[]): Promise<void>;
}

/** Answered 503: the write is stored, the read models do not show it yet. */
export const SERVER_LAGGING = 'SERVER.LAGGING';

/**
 * Waits until the read models include `position` (read-your-writes). The
 * events are durable by then, so a wait that fails or times out must not
 * look like a failed command: it becomes SERVER.LAGGING, whose message says
 * what was done (`done`, e.g. "written as version 5 of state x"). `types`:
 * see ReadModelSync.waitForPosition.
 */
export async function awaitReadModels(
  sync: ReadModelSync,
  position: LogPosition | null,
  done: () => string,
  types?: readonly string[],
): Promise<void> {
  if (position === null) return;
  try {
    await sync.waitForPosition(position, types);
  } catch (err) {
    throw new DomainError(
      SERVER_LAGGING,
      `${done()}; read models catching up`,
      { position: position.globalPosition.toString() },
      { cause: err },
    );
  }
}
