/** The first non-empty line of an error: plugin errors can carry whole stack traces. */
export function oneLine(e: unknown): string {
  const text = e instanceof Error ? e.message : String(e);
  return (
    text
      .split('\n')
      .find((l) => l.trim() !== '')
      ?.trim() ?? 'failed'
  );
}
