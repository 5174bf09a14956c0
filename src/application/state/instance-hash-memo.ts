import type { LRUCache } from 'lru-cache';
import {
  instanceHash,
  InstanceHasher,
  InstanceObjectV4,
  ResourceDescriptor,
  sameJson,
} from '../../domain/terraform';
import { boundedCache, DEFAULT_CACHE_BUDGETS } from '../bounded-cache';

interface Remembered {
  resource: ResourceDescriptor;
  instance: InstanceObjectV4;
  hash: string;
}

type Memo = Map<string, Remembered>;

type Hash = (resource: ResourceDescriptor, instance: InstanceObjectV4) => string;

/**
 * The instances each state committed last, by address, with their canonical
 * hashes. Terraform rewrites the whole document on every change, so most
 * instances of a new commit are equal to the ones before; comparing values is
 * far cheaper than canonical hashing (sorting keys at every depth, then
 * sha256), which is then paid only for what changed. Equal values mean an
 * equal hash, so an entry can go stale but never lie: a miss only costs the
 * hash.
 *
 * Holds the parsed objects of the last document (treated as immutable, like
 * every parsed document), bounded by instances held (CacheBudgets
 * `hashInstances`, a few hundred MB for 100,000 big AWS instances), least
 * recently committed state first out.
 */
export class InstanceHashMemo {
  private readonly states: LRUCache<string, Memo>;
  private readonly hashOf: Hash;

  constructor(options: { maxInstances?: number; hash?: Hash } = {}) {
    this.states = boundedCache<Memo>(
      options.maxInstances ?? DEFAULT_CACHE_BUDGETS.hashInstances,
      (memo) => memo.size,
    );
    this.hashOf = options.hash ?? instanceHash;
  }

  /**
   * A hasher for one commit to `key` (the state's stream). What it hashed
   * becomes the state's memo when `done` is called, replacing the previous
   * one, so the memo holds one document per state.
   */
  open(key: string): { hash: InstanceHasher; done(): void } {
    // peek: a state's place in line is its last commit, not its last look.
    const previous = this.states.peek(key);
    const next: Memo = new Map();
    // Instances of one resource share their descriptor: compare it once.
    const sameResource = new Map<ResourceDescriptor, Set<ResourceDescriptor>>();
    const same = (a: ResourceDescriptor, b: ResourceDescriptor): boolean => {
      if (a === b) return true;
      let known = sameResource.get(a);
      if (known?.has(b)) return true;
      if (!sameJson({ ...a }, { ...b })) return false;
      if (!known) sameResource.set(a, (known = new Set()));
      known.add(b);
      return true;
    };
    const hash: InstanceHasher = (address, resource, instance) => {
      const known = next.get(address) ?? previous?.get(address);
      const value =
        known !== undefined && same(resource, known.resource) && sameJson(instance, known.instance)
          ? known.hash
          : this.hashOf(resource, instance);
      next.set(address, { resource, instance, hash: value });
      return value;
    };
    return {
      hash,
      done: () => {
        if (next.size === 0) this.states.delete(key);
        else this.states.set(key, next);
      },
    };
  }
}
