/** How often a running query's locks are looked at (a short query never is). */
export const WATCH_EVERY_MS = 500;

export interface AdvisoryLockWatch {
  /** The query held or waited for an advisory lock, and was cancelled for it. */
  readonly caught: boolean;
  stop(): void;
}

/**
 * Advisory locks are kld's own (each projector's, the serving lock, the
 * migrations'), and PostgreSQL lets any role take any of them: a query that
 * took the key a projector locks (`SELECT pg_advisory_xact_lock(…),
 * pg_sleep(…)`), or only waited for it, would hold up every write for as long
 * as its statement may run, and a caller with nothing but the `query` scope
 * could do it again and again. No grant can forbid the functions (PUBLIC may
 * run them, and only a superuser could change that), and no reading of the
 * SQL can see through `query_to_xml('…')`; so while a query runs, its
 * backend's entries in `pg_locks` are looked at every `everyMs`, and one that
 * holds or waits for an advisory lock is cancelled (`cancel`).
 */
export function watchAdvisoryLocks(
  pid: number,
  holdsOne: (pid: number) => Promise<boolean>,
  cancel: (pid: number) => Promise<void>,
  everyMs = WATCH_EVERY_MS,
): AdvisoryLockWatch {
  let caught = false;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const look = async () => {
    try {
      if (await holdsOne(pid)) {
        caught = true;
        // Until the statement ends and the watch is stopped: a cancel that
        // fell between two statements is sent again.
        if (!stopped) await cancel(pid);
      }
    } catch {
      // A look or a cancel that failed (the database busy or gone): tried again.
    }
    if (!stopped) schedule();
  };
  const schedule = () => {
    timer = setTimeout(() => void look(), everyMs);
    timer.unref();
  };
  schedule();
  return {
    get caught() {
      return caught;
    },
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
