/**
 * Polls `check` until it holds, for at most `withinMs`; fails naming `what`.
 * A test waits for the thing itself, not for a fixed time that a loaded
 * machine may overrun.
 */
export async function until(
  what: string,
  check: () => Promise<boolean>,
  { everyMs = 100, withinMs = 60_000 } = {},
): Promise<void> {
  for (const deadline = Date.now() + withinMs; Date.now() < deadline;) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`not within ${withinMs / 1000} s: ${what}`);
}
