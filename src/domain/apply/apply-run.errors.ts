/** Stable, public error codes of apply runs (the State aggregate's APPLY.* codes are in state.errors). */
export const APPLY_NOT_FOUND = 'APPLY.NOT_FOUND';
/** The run already ended, otherwise than asked. */
export const APPLY_FINISHED = 'APPLY.FINISHED';
