import { DomainError } from './domain-error';
import { LogPosition } from './event';

/** A cursor that is malformed or names no event of this log. */
export const EVENTS_INVALID_POSITION = 'EVENTS.INVALID_POSITION';

const CURSOR = /^([0-9a-f]{16})-([0-9a-f]{16})$/;
const MAX = (1n << 63n) - 1n;
/** Transaction keys hold the log's epoch above 48 bits of transaction id (migration 012). */
const EPOCH_SHIFT = 48n;

/**
 * A position as subscribers see it: 16 hex digits of the transaction key, a
 * dash, 16 of the global position. Fixed width, so two cursors compare as
 * strings the way their events sort in the log; the first 4 digits are the
 * log's epoch. The same text as `event_log.cursor` (kl_log_cursor).
 */
export function formatCursor(position: LogPosition): string {
  return `${hex16(position.transactionId)}-${hex16(position.globalPosition)}`;
}

/** The position a cursor names; DomainError EVENTS.INVALID_POSITION when it is not one. */
export function parseCursor(text: string): LogPosition {
  const m = CURSOR.exec(text);
  if (!m) {
    const shown = text.length > 60 ? `${text.slice(0, 60)}…` : text;
    throw new DomainError(
      EVENTS_INVALID_POSITION,
      `"${shown}" is not a position: expected a cursor as events carry it ` +
        '(16 hex digits, a dash, 16 hex digits)',
    );
  }
  const position = { transactionId: BigInt(`0x${m[1]}`), globalPosition: BigInt(`0x${m[2]}`) };
  if (position.transactionId > MAX || position.globalPosition > MAX) {
    throw new DomainError(EVENTS_INVALID_POSITION, `"${text}" is beyond any position of a log`);
  }
  return position;
}

/** The log epoch a position was written in (0 until a restore into a cluster behind the log). */
export function epochOf(position: LogPosition): number {
  return Number(position.transactionId >> EPOCH_SHIFT);
}

function hex16(n: bigint): string {
  if (n < 0n || n > MAX) throw new RangeError(`position component out of range: ${n}`);
  return n.toString(16).padStart(16, '0');
}
