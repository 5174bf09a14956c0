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
