/**
 * How much a refresh result may say about one instance. An honest one says
 * far less: its changed paths are the leaves of one instance that differ
 * (the longest lists providers keep, WAF IP sets, hold 10,000 items, and a
 * path is attribute names and keys), and kl and kld send one line of a
 * plugin's error. Past these, a result is not a provider's.
 */
export const MAX_CHANGED_PATHS = 100_000;
export const MAX_CHANGED_PATH_CHARS = 4_096;
export const MAX_CHANGED_PATHS_CHARS = 16 * 1024 * 1024;
/** A result's `error`, and a run's `error_summary` when it finishes. */
export const MAX_RESULT_ERROR_CHARS = 64 * 1024;

/** Why a result's changed paths are past the bounds, or null. */
export function changedPathsProblem(paths: readonly string[]): string | null {
  if (paths.length > MAX_CHANGED_PATHS) {
    return `has ${paths.length} paths, more than ${MAX_CHANGED_PATHS}`;
  }
  let total = 0;
  for (let i = 0; i < paths.length; i++) {
    const length = paths[i].length;
    if (length > MAX_CHANGED_PATH_CHARS) {
      return `has a path longer than ${MAX_CHANGED_PATH_CHARS} characters (at ${i})`;
    }
    total += length;
  }
  return total > MAX_CHANGED_PATHS_CHARS
    ? `has more than ${MAX_CHANGED_PATHS_CHARS} characters in all`
    : null;
}
