/**
 * One stream per state *name*: a deleted name that is used again continues
 * the same stream under a new stateId, so "is this name taken, and locked?"
 * is decided on one stream with one expected revision.
 */
export function stateStreamId(name: string): string {
  return `state-${name}`;
}
