import { DomainError } from '../../domain/shared/domain-error';
import type { LogPosition } from '../../domain/shared/event';

export const READ_MODEL_SYNC = Symbol('ReadModelSync');

/** Lets a command answer only once the read models include its events. */
export interface ReadModelSync {
  waitForPosition(position: LogPosition): Promise<void>;
}

/** Answered 503: the write is stored, the read models do not show it yet. */
export const SERVER_LAGGING = 'SERVER.LAGGING';

/**
 * Waits until the read models include `position` (read-your-writes). The
 * events are durable by then, so a wait that fails or times out must not
 * look like a failed command: it becomes SERVER.LAGGING, whose message says
 * what was done (`done`, e.g. "written as version 5 of state x").
 */
export async function awaitReadModels(
  sync: ReadModelSync,
  position: LogPosition | null,
  done: () => string,
): Promise<void> {
  if (position === null) return;
  try {
    await sync.waitForPosition(position);
  } catch (err) {
    throw new DomainError(
      SERVER_LAGGING,
      `${done()}; read models catching up`,
      { position: position.globalPosition.toString() },
      { cause: err },
    );
  }
}
