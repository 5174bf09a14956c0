import type { KilolockClient } from './kilolock-client';
import { visible } from './terminal-text';

/** What a preflight found: exit 2 over the hard limit, a warning over the soft one. */
export interface QuotaPreflight {
  over: 'hard' | 'soft' | null;
  /** One readable line: state, limit, projected count. */
  message: string;
}

/**
 * Asks kld whether a plan's `creates` and `deletes` keep the state within
 * its quota (`kl quota check`, `kl plan`): the projected count is the
 * state's current one plus creates minus deletes.
 */
export async function quotaPreflight(
  client: KilolockClient,
  state: string,
  creates: number,
  deletes: number,
): Promise<QuotaPreflight> {
  const answer = await client.quotaCheck(state, creates, deletes);
  return { over: answer.over, message: answer.message };
}

/** Prints a preflight's warning (soft) or refusal (hard); answers the exit status it calls for. */
export function reportPreflight(p: QuotaPreflight, hardExit: number): number {
  if (p.over === 'hard') {
    process.stderr.write(`kl: quota exceeded: ${visible(p.message)}\n`);
    return hardExit;
  }
  if (p.over === 'soft') process.stderr.write(`kl: warning: ${visible(p.message)}\n`);
  return 0;
}
