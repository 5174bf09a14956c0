/** One stream per kl apply run: `ApplyStarted`, then `ApplyFinished`. */
export function applyStreamId(runId: string): string {
  return `apply-${runId}`;
}
