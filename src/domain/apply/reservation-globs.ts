import { parseInstanceAddress } from '../terraform/instance-address';
import { isUnderModule, modulePrefixes, reservableAddress } from './addresses';

/**
 * The globs that reserve exactly `addresses` among every address kl knows of
 * (`universe`: the trunk's instances and the plan's). A module instance whose
 * known addresses all belong to the set is named once as `module.x.*`
 * instead of address by address; the outermost such module wins. Anything
 * else stays a literal address. Deposed objects are reserved through their
 * instance address.
 */
export function collapseToGlobs(addresses: Iterable<string>, universe: Iterable<string>): string[] {
  const set = new Set([...addresses].map(reservableAddress));
  if (set.size === 0) return [];
  const known = new Set([...universe].map(reservableAddress));
  for (const a of set) known.add(a);

  // Module prefix → how many known addresses lie under it, and how many of them are in the set.
  const counts = new Map<string, { known: number; wanted: number }>();
  for (const address of known) {
    for (const prefix of modulePrefixes(parseInstanceAddress(address))) {
      const c = counts.get(prefix) ?? { known: 0, wanted: 0 };
      c.known++;
      if (set.has(address)) c.wanted++;
      counts.set(prefix, c);
    }
  }
  const globs: string[] = [];
  const covered = new Set<string>();
  // Shortest prefixes first, so an outer module swallows its inner ones.
  const prefixes = [...counts.keys()].sort((a, b) => a.length - b.length || (a < b ? -1 : 1));
  const chosen: string[] = [];
  for (const prefix of prefixes) {
    const c = counts.get(prefix)!;
    if (c.wanted !== c.known || c.wanted < 2) continue;
    if (chosen.some((p) => isUnderModule(prefix, p))) continue;
    chosen.push(prefix);
    globs.push(`${prefix}.*`);
    for (const a of set) if (isUnderModule(a, prefix)) covered.add(a);
  }
  for (const a of set) if (!covered.has(a)) globs.push(a);
  return globs.sort();
}
