import { IndexKey, InstanceAddress, ResourceMode } from '../terraform/instance-address';
import { AddressGlob } from './address-glob';

/**
 * Globs indexed by their steps, so that "which of them meet this glob" or
 * "which cover this address" costs the steps walked plus the answers rather
 * than one comparison per glob held (a run may hold tens of thousands, and
 * so may the run beside it). It answers exactly what globsIntersect and
 * globCovers answer pair by pair (they stay the definition; a property test
 * holds the two together).
 *
 * The shape is a trie over module steps: per module call name, the instances
 * with a key and the one "any key" entry (a step without key). A node keeps
 * the open globs that end there, and the resource globs at that depth, per
 * resource with the same split of keyed and "any key" entries.
 */
export class GlobIndex<T> {
  private readonly root = node<T>();

  add(glob: AddressGlob, value: T): void {
    let at = this.root;
    for (const step of glob.modules) {
      let branch = at.modules.get(step.name);
      if (branch === undefined) {
        branch = { any: null, keyed: new Map() };
        at.modules.set(step.name, branch);
      }
      at =
        step.key === undefined
          ? (branch.any ??= node<T>())
          : keyed(branch.keyed, step.key, () => node<T>());
    }
    const r = glob.resource;
    if (r === null) {
      at.open.push(value);
      return;
    }
    const name = resourceName(r.mode, r.type, r.name);
    let entry = at.resources.get(name);
    if (entry === undefined) {
      entry = { any: [], keyed: new Map() };
      at.resources.set(name, entry);
    }
    if (r.key === undefined) entry.any.push(value);
    else keyed(entry.keyed, r.key, () => []).push(value);
  }

  /** The values whose glob meets at least one of `globs`, each once. */
  meeting(globs: Iterable<AddressGlob>): Set<T> {
    const walk = new Walk<T>();
    for (const glob of globs) walk.meet(this.root, glob, 0);
    return walk.found;
  }

  /** The values whose glob covers at least one of `addresses`, each once. */
  covering(addresses: Iterable<InstanceAddress>): Set<T> {
    const walk = new Walk<T>();
    for (const address of addresses) walk.cover(this.root, address, 0);
    return walk.found;
  }

  /** Does some glob cover this address? */
  covers(address: InstanceAddress): boolean {
    return coveredAt(this.root, address, 0);
  }
}

interface Node<T> {
  /** Open globs (everything below) that end here. */
  open: T[];
  /** Resource globs at this depth, by resourceName. */
  resources: Map<string, ResourceEntry<T>>;
  /** Deeper globs, by module call name. */
  modules: Map<string, Branch<T>>;
}

interface Branch<T> {
  /** The step without key: any instance of the call. */
  any: Node<T> | null;
  /** Map keys compare as globs do: 1 and "1" are different keys. */
  keyed: Map<IndexKey, Node<T>>;
}

interface ResourceEntry<T> {
  any: T[];
  keyed: Map<IndexKey, T[]>;
}

function node<T>(): Node<T> {
  return { open: [], resources: new Map(), modules: new Map() };
}

function keyed<V>(map: Map<IndexKey, V>, key: IndexKey, make: () => V): V {
  let v = map.get(key);
  if (v === undefined) {
    v = make();
    map.set(key, v);
  }
  return v;
}

/** Identifiers hold no spaces, so this names one resource exactly. */
function resourceName(mode: ResourceMode, type: string, name: string): string {
  return `${mode} ${type} ${name}`;
}

/**
 * One question over many globs or addresses. Each list of values (and each
 * subtree taken whole) is reported once: a second glob reaching it adds
 * nothing, so a walk costs at most what the index holds, however many globs
 * lead to the same entries.
 */
class Walk<T> {
  readonly found = new Set<T>();
  private readonly done = new Set<object>();

  meet(at: Node<T>, glob: AddressGlob, depth: number): void {
    if (this.done.has(at)) return; // reported whole already
    // An open glob ending above the wanted one's depth covers all of it.
    this.report(at.open);
    if (depth < glob.modules.length) {
      const step = glob.modules[depth];
      const branch = at.modules.get(step.name);
      if (branch === undefined) return;
      if (branch.any !== null) this.meet(branch.any, glob, depth + 1);
      if (step.key === undefined) {
        for (const child of branch.keyed.values()) this.meet(child, glob, depth + 1);
      } else {
        const child = branch.keyed.get(step.key);
        if (child !== undefined) this.meet(child, glob, depth + 1);
      }
      return;
    }
    const r = glob.resource;
    if (r === null) {
      this.subtree(at);
      return;
    }
    // A resource glob meets only resource globs at its own depth.
    const entry = at.resources.get(resourceName(r.mode, r.type, r.name));
    if (entry === undefined) return;
    if (r.key === undefined) this.allKeys(entry);
    else {
      this.report(entry.any);
      this.report(entry.keyed.get(r.key));
    }
  }

  cover(at: Node<T>, address: InstanceAddress, depth: number): void {
    if (this.done.has(at)) return;
    this.report(at.open);
    if (depth < address.module.length) {
      const step = address.module[depth];
      const branch = at.modules.get(step.name);
      if (branch === undefined) return;
      if (branch.any !== null) this.cover(branch.any, address, depth + 1);
      if (step.key !== undefined) {
        const child = branch.keyed.get(step.key);
        if (child !== undefined) this.cover(child, address, depth + 1);
      }
      return;
    }
    const entry = at.resources.get(resourceName(address.mode, address.type, address.name));
    if (entry === undefined) return;
    this.report(entry.any);
    if (address.key !== undefined) this.report(entry.keyed.get(address.key));
  }

  private report(values: T[] | undefined): void {
    if (values === undefined || values.length === 0 || this.done.has(values)) return;
    this.done.add(values);
    for (const v of values) this.found.add(v);
  }

  private allKeys(entry: ResourceEntry<T>): void {
    if (this.done.has(entry)) return;
    this.done.add(entry);
    this.report(entry.any);
    for (const values of entry.keyed.values()) this.report(values);
  }

  private subtree(at: Node<T>): void {
    if (this.done.has(at)) return;
    this.done.add(at);
    this.report(at.open);
    for (const entry of at.resources.values()) this.allKeys(entry);
    for (const branch of at.modules.values()) {
      if (branch.any !== null) this.subtree(branch.any);
      for (const child of branch.keyed.values()) this.subtree(child);
    }
  }
}

function coveredAt<T>(at: Node<T>, address: InstanceAddress, depth: number): boolean {
  if (at.open.length > 0) return true;
  if (depth < address.module.length) {
    const step = address.module[depth];
    const branch = at.modules.get(step.name);
    if (branch === undefined) return false;
    if (branch.any !== null && coveredAt(branch.any, address, depth + 1)) return true;
    if (step.key === undefined) return false;
    const child = branch.keyed.get(step.key);
    return child !== undefined && coveredAt(child, address, depth + 1);
  }
  const entry = at.resources.get(resourceName(address.mode, address.type, address.name));
  if (entry === undefined) return false;
  return entry.any.length > 0 || (address.key !== undefined && entry.keyed.has(address.key));
}
