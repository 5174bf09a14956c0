/** Stable, public error codes of the State aggregate. */
export const STATE_LOCKED = 'STATE.LOCKED';
export const STATE_LOCK_MISMATCH = 'STATE.LOCK_MISMATCH';
export const STATE_NOT_FOUND = 'STATE.NOT_FOUND';
export const STATE_VERSION_CONFLICT = 'STATE.VERSION_CONFLICT';
/** A checked commit (an import) of another lineage than the current version's. */
export const STATE_LINEAGE_CONFLICT = 'STATE.LINEAGE_CONFLICT';
/** A checked commit (an import) whose serial is older than the current version's. */
export const STATE_SERIAL_CONFLICT = 'STATE.SERIAL_CONFLICT';
export { STATE_INVALID } from '../terraform/parse-state-document';
/** A reservation (or terraform lock) someone else holds covers what was asked for. */
export const RESERVATION_CONFLICT = 'RESERVATION.CONFLICT';
/** A write outside the run's live write reservations, or by a run that holds none. */
export const RESERVATION_NOT_HELD = 'RESERVATION.NOT_HELD';
/** The run's reservations are gone: reclaimed after its lease ran out, or released. */
export const RESERVATION_EXPIRED = 'RESERVATION.EXPIRED';
/** An address the plan wrote or read changed after the version it was based on. */
export const APPLY_STALE = 'APPLY.STALE';
/** A row-level change that cannot be applied as sent (addresses, fields, outputs). */
export const APPLY_INVALID = 'APPLY.INVALID';
/** An apply run on a state that has no version yet. */
export const APPLY_NO_VERSION = 'APPLY.NO_VERSION';
/** A run id that already holds other reservations. */
export const APPLY_ALREADY_STARTED = 'APPLY.ALREADY_STARTED';
