/** How long a finished one-shot kld command may take to exit. */
export const EXIT_GRACE_MS = 10_000;

export interface ExitWatchdogIo {
  /** What keeps the process running (process.getActiveResourcesInfo). */
  openResources(): string[];
  write(line: string): void;
  exit(code: number): void;
}

const processIo: ExitWatchdogIo = {
  openResources: () => process.getActiveResourcesInfo(),
  write: (line) => process.stderr.write(line),
  exit: (code) => process.exit(code),
};

/**
 * A one-shot command (`kld token create`, `kld migrate`…) ends when nothing
 * is left open once its work is done. Something left open by mistake (a
 * connection, a timer) would make it hang silently after it printed its
 * result, and a caller waiting for it with it; after `graceMs` this says
 * what is still open and exits 1. The timer itself keeps nothing running.
 */
export function armExitWatchdog(
  command: string,
  graceMs = EXIT_GRACE_MS,
  io: ExitWatchdogIo = processIo,
): NodeJS.Timeout {
  const timer = setTimeout(() => {
    io.write(
      `kld: ${command} finished but did not exit within ${graceMs / 1000} s ` +
        `(still open: ${describe(io.openResources())}); exiting\n`,
    );
    io.exit(1);
  }, graceMs);
  timer.unref();
  return timer;
}

/** `TCPSocketWrap ×2, Timeout`: each kind once, with its count. */
function describe(resources: string[]): string {
  const counts = new Map<string, number>();
  for (const r of resources) counts.set(r, (counts.get(r) ?? 0) + 1);
  if (counts.size === 0) return 'nothing known';
  return [...counts].map(([r, n]) => (n > 1 ? `${r} ×${n}` : r)).join(', ');
}
