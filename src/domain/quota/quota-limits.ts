import { globMatches } from '../auth/scopes';
import { parseInstanceAddress } from '../terraform/instance-address';

/**
 * A quota: every state whose name matches `glob` may hold at most
 * `maxResources` resources (the hard limit); above `softResources` kl warns.
 */
export interface QuotaLimit {
  glob: string;
  maxResources: number;
  softResources: number | null;
}

export type QuotaLevel = 'hard' | 'soft';

/** Characters of a glob that are not wildcards: how much of a name it pins down. */
function literalLength(glob: string): number {
  return glob.replace(/[*?]/g, '').length;
}

function wildcards(glob: string): number {
  return glob.length - literalLength(glob);
}

/**
 * The quota that governs a state when several globs match its name: the
 * most specific one (most literal characters, then fewest wildcards), so an
 * admin can carve an exception for one state out of a team-wide rule; on a
 * tie, the lower hard limit, then the glob's spelling, so the choice never
 * depends on the order rules were set in.
 */
export function effectiveQuota(
  rules: Iterable<QuotaLimit>,
  stateName: string,
): QuotaLimit | undefined {
  let best: QuotaLimit | undefined;
  for (const rule of rules) {
    if (!globMatches(rule.glob, stateName)) continue;
    if (best === undefined || precedes(rule, best)) best = rule;
  }
  return best;
}

function precedes(a: QuotaLimit, b: QuotaLimit): boolean {
  const byLiteral = literalLength(a.glob) - literalLength(b.glob);
  if (byLiteral !== 0) return byLiteral > 0;
  const byWildcards = wildcards(a.glob) - wildcards(b.glob);
  if (byWildcards !== 0) return byWildcards < 0;
  if (a.maxResources !== b.maxResources) return a.maxResources < b.maxResources;
  return a.glob < b.glob;
}

/**
 * What a quota counts: the instances of managed resources, one per `count`
 * or `for_each` instance, that the state's current version holds. Data
 * sources are reads, not infrastructure; deposed objects are the leftovers
 * of a replacement on their way out. `terraform_data` and other built-in
 * managed resources count, as in terraform's own "N added" summary.
 */
export function isCountedAddress(address: string): boolean {
  // Most addresses say so without parsing: no `data.` and not deposed.
  if (!address.includes('data.') && !address.includes(' (deposed object ')) return true;
  const parsed = parseInstanceAddress(address);
  return parsed.mode === 'managed' && parsed.deposed === undefined;
}

export function countedResources(addresses: Iterable<string>): number {
  let n = 0;
  for (const a of addresses) if (isCountedAddress(a)) n++;
  return n;
}

/** Which limit a count is over, if any: strictly over, since a limit is what may be held. */
export function overrunOf(limit: QuotaLimit, count: number): QuotaLevel | null {
  if (count > limit.maxResources) return 'hard';
  if (limit.softResources !== null && count > limit.softResources) return 'soft';
  return null;
}

/** What a projected count would mean under a quota: kl's verdict for a plan. */
export interface QuotaVerdict {
  current: number;
  delta: number;
  projected: number;
  /** Null when no quota governs the state. */
  quota: QuotaLimit | null;
  level: QuotaLevel | null;
}

export function verdictOf(quota: QuotaLimit | null, current: number, delta: number): QuotaVerdict {
  const projected = Math.max(0, current + delta);
  return {
    current,
    delta,
    projected,
    quota,
    level: quota === null ? null : overrunOf(quota, projected),
  };
}

/** The one line kl prints for a verdict over a limit. */
export function describeVerdict(state: string, v: QuotaVerdict): string {
  if (v.quota === null || v.level === null) {
    return v.quota === null
      ? `state ${state} has no quota; it would hold ${v.projected} resources`
      : `state ${state} would hold ${v.projected} resources, within quota ${v.quota.glob} (max ${v.quota.maxResources})`;
  }
  const limit = v.level === 'hard' ? v.quota.maxResources : (v.quota.softResources as number);
  return (
    `state ${state} would hold ${v.projected} resources (now ${v.current}, ` +
    `${v.delta >= 0 ? '+' : ''}${v.delta}), over the ${v.level} limit ${limit} of quota ${v.quota.glob}`
  );
}
