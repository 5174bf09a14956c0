export const APPLY_RUN_LOOKUP = Symbol('ApplyRunLookup');

/** What the apply-run use cases read from the read models. */
export interface ApplyRunLookup {
  /** The state a run started on, or holds reservations on; null when none records it. */
  stateOfRun(runId: string): Promise<string | null>;
}
