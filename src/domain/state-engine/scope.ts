import {
  AddressGlob,
  formatAddressGlob,
  globCovers,
  parseAddressGlob,
} from '../reservations/address-glob';
import { DomainError } from '../shared/domain-error';
import { InstanceAddress, parseInstanceAddress } from '../terraform/instance-address';

/**
 * Scope expansion of the state-engine lane (ADR 0029 D3): what a client's
 * local intent (candidate addresses, module prefixes, selectors) names in
 * the realized state, what it pulls in through dependencies, and whether
 * the server can prove the scope safe to plan and write on a slice.
 */

export type CandidateKind = 'address' | 'module' | 'selector';

/** `{type}` or `{type, module}`: every resource of a type, anywhere or under a module. */
export interface Selector {
  type: string;
  module?: string;
}

export interface Candidate {
  kind: CandidateKind;
  /** As the client sent it (a selector spelled `type=T[,module=M]`). */
  text: string;
  /** What it covers, as reservation globs do. */
  glob: AddressGlob;
  /** A selector's resource type; null for the others. */
  type: string | null;
}

/**
 * Never in this state (`undeployed`), in it at an earlier version and gone
 * now (`removed`), or a prefix or selector matching nothing ever, which the
 * server cannot tell apart from a typo (`unknown`).
 */
export type Classification = 'undeployed' | 'removed' | 'unknown';

const invalid = (message: string) => new DomainError('REQUEST.INVALID', message);

export function addressCandidate(text: string): Candidate {
  const glob = globOf(text, 'addresses');
  if (glob.resource === null) {
    throw invalid(
      `addresses: ${JSON.stringify(text)} is a module path: send it in module_prefixes`,
    );
  }
  return { kind: 'address', text, glob, type: null };
}

export function moduleCandidate(text: string): Candidate {
  const glob = globOf(text, 'module_prefixes');
  if (glob.resource !== null || glob.modules.length === 0) {
    throw invalid(
      `module_prefixes: ${JSON.stringify(text)} is not a module path such as module.net`,
    );
  }
  return { kind: 'module', text, glob, type: null };
}

export function selectorCandidate(s: Selector): Candidate {
  const glob = s.module === undefined ? parseAddressGlob('*') : moduleCandidate(s.module).glob;
  const text = `type=${s.type}${s.module === undefined ? '' : `,module=${s.module}`}`;
  return { kind: 'selector', text, glob, type: s.type };
}

function globOf(text: string, where: string): AddressGlob {
  try {
    return parseAddressGlob(text);
  } catch (err) {
    throw invalid(`${where}: ${(err as Error).message}`);
  }
}

/** Does the candidate name this instance? */
export function candidateCovers(c: Candidate, address: InstanceAddress): boolean {
  if (c.type !== null && address.type !== c.type) return false;
  return globCovers(c.glob, address);
}

/** A read-model row reduced to what expansion needs. */
export interface RealizedInstance {
  address: string;
  resourceAddress: string;
}

export function parsedAddress(text: string): InstanceAddress {
  return parseInstanceAddress(text);
}

export interface ClosureEntry {
  address: string;
  direction: 'dependency' | 'dependent';
  /** The in-scope or closure resource through which it was reached. */
  via: string;
  reason: string;
}

export interface ScopeInput {
  candidates: Candidate[];
  /** Live instances each candidate matched, by candidate index. */
  matched: RealizedInstance[][];
  /** Candidates (by index) that matched nothing live but something at an earlier version. */
  seenBefore: Set<number>;
  /** Upstream edges reached from the scope: resource → what it depends on. */
  dependencies: { address: string; via: string }[];
  /** Downstream edges: resource → who depends on it. */
  dependents: { address: string; via: string }[];
  /** Resource addresses with live instances, among those the edges name. */
  realized: Set<string>;
}

export interface ScopeAnswer {
  scope: { address: string; instances: string[]; matched_by: string[] }[];
  closure: ClosureEntry[];
  unresolved: { candidate: string; kind: CandidateKind; classification: Classification }[];
  reservations: { write: string[]; read: string[] };
  provably_safe: boolean;
  reasons: string[];
}

/** Decides the answer from what the read models returned for the candidates. */
export function expandScope(input: ScopeInput): ScopeAnswer {
  const scope = new Map<string, { instances: Set<string>; matchedBy: Set<string> }>();
  const unresolved: ScopeAnswer['unresolved'] = [];
  const undeployedWrites: string[] = [];
  input.candidates.forEach((c, i) => {
    const rows = input.matched[i];
    if (rows.length === 0) {
      let classification: Classification;
      if (input.seenBefore.has(i)) classification = 'removed';
      else classification = c.kind === 'address' ? 'undeployed' : 'unknown';
      unresolved.push({ candidate: c.text, kind: c.kind, classification });
      // Configuration that will create it: the write must cover it.
      if (c.kind === 'address') undeployedWrites.push(formatAddressGlob(c.glob));
      return;
    }
    for (const r of rows) {
      const entry = scope.get(r.resourceAddress) ?? { instances: new Set(), matchedBy: new Set() };
      entry.instances.add(r.address);
      entry.matchedBy.add(c.text);
      scope.set(r.resourceAddress, entry);
    }
  });

  const closure: ClosureEntry[] = [];
  const inClosure = new Set<string>();
  const reasons: string[] = [];
  for (const d of input.dependencies) {
    if (scope.has(d.address) || inClosure.has(d.address)) continue;
    inClosure.add(d.address);
    closure.push({
      address: d.address,
      direction: 'dependency',
      via: d.via,
      reason: `${d.via} depends on it`,
    });
    if (!input.realized.has(d.address)) {
      reasons.push(`${d.via} depends on ${d.address}, which is not in the state`);
    }
  }
  for (const d of input.dependents) {
    if (scope.has(d.address) || inClosure.has(d.address)) continue;
    inClosure.add(d.address);
    closure.push({
      address: d.address,
      direction: 'dependent',
      via: d.via,
      reason: `it depends on ${d.via}`,
    });
  }
  for (const u of unresolved) {
    if (u.classification === 'unknown') {
      reasons.push(`${u.kind} ${u.candidate} matches nothing in this state, now or before`);
    }
  }
  if (scope.size === 0 && undeployedWrites.length === 0) {
    reasons.push('the candidates name nothing to plan');
  }

  const write = [...new Set([...scope.keys(), ...undeployedWrites])].sort();
  const read = [...inClosure].filter((a) => !write.includes(a)).sort();
  return {
    scope: [...scope]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([address, e]) => ({
        address,
        instances: [...e.instances].sort(),
        matched_by: [...e.matchedBy],
      })),
    closure,
    unresolved,
    reservations: { write, read },
    provably_safe: reasons.length === 0,
    reasons,
  };
}
