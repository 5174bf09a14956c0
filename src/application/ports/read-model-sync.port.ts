import type { LogPosition } from '../../domain/shared/event';

export const READ_MODEL_SYNC = Symbol('ReadModelSync');

/** Lets a command answer only once the read models include its events. */
export interface ReadModelSync {
  waitForPosition(position: LogPosition): Promise<void>;
}
