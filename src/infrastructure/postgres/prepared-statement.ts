import { createHash } from 'node:crypto';
import type { QueryConfig } from 'pg';

/** Statement names by text: one entry per distinct text ever prepared. */
const names = new Map<string, string>();

/**
 * `text` with `values` as a named statement: PostgreSQL parses it once per
 * connection (node-postgres remembers which connection prepared which
 * name), and after five runs may keep one plan for it, where an unnamed
 * statement is parsed, analysed and planned on every run. On the small
 * commands' path (an append, a lock's or a commit's read models, their
 * checkpoints) that was a tenth to a quarter of a millisecond per statement
 * of PostgreSQL's CPU (docs/performance-history.md, "The next-serial push (wave
 * 16)").
 *
 * Only for a text from a fixed set (a literal, or one of a few variants
 * built from constants, never from data): every distinct text stays
 * prepared on every connection that ran it, for the connection's life. And
 * only where the best plan does not depend on the values, such as lookups
 * by key and inserts of rows given: a plan kept for arrays of three rows
 * would serve arrays of thousands too. The name is the text's hash, so a
 * text always has the same name and two texts never share one.
 */
export function prepared(text: string, values: unknown[]): QueryConfig {
  let name = names.get(text);
  if (name === undefined) {
    name = `kl_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`;
    names.set(text, name);
  }
  return { name, text, values };
}
