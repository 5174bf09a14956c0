import type { LRUCache } from 'lru-cache';
import {
  FlatInstance,
  instanceHash,
  InstanceHasher,
  KnownFlatInstance,
  sameDescriptor,
  InstanceObjectV4,
  ResourceDescriptor,
  sameJson,
} from '../../domain/terraform';
import { boundedCache, DEFAULT_CACHE_BUDGETS } from '../bounded-cache';

/** A state's memo: the flat instances its commits made, by address. */
type Memo = Map<string, FlatInstance>;

type Hash = (resource: ResourceDescriptor, instance: InstanceObjectV4) => string;

/**
 * The instances each state committed, by address, with their canonical
 * hashes. Terraform rewrites the whole document on every change, so most
 * instances of a new commit are equal to the ones before; comparing values is
 * far cheaper than canonical hashing (sorting keys at every depth, then
 * sha256), which is then paid only for what changed. Equal values mean an
 * equal hash, so an entry can go stale but never lie: a miss only costs the
 * hash.
 *
 * An instance object shared with the state's last document (the parse reuses
 * the objects of unchanged bytes, DocumentTextMemo) is answered by identity
 * (`known`): its flat instance is the one made before, and neither its address
 * nor its memo entry is touched, so a commit costs in proportion to what it
 * changed. A state's memo is therefore kept from commit to commit and only
 * rebuilt from the commit's instances once it holds twice as many addresses
 * (the removed ones).
 *
 * Holds the parsed objects of the documents (treated as immutable, like
 * every parsed document), bounded by instances held (CacheBudgets
 * `hashInstances`, a few hundred MB for 100,000 big AWS instances), least
 * recently committed state first out.
 */
export class InstanceHashMemo {
  private readonly states: LRUCache<string, Memo>;
  private readonly hashOf: Hash;
  /** Flat instances by their instance object; they go when the objects do. */
  private readonly flats = new WeakMap<InstanceObjectV4, FlatInstance>();

  constructor(options: { maxInstances?: number; hash?: Hash } = {}) {
    this.states = boundedCache<Memo>(
      options.maxInstances ?? DEFAULT_CACHE_BUDGETS.hashInstances,
      (memo) => memo.size,
    );
    this.hashOf = options.hash ?? instanceHash;
  }

  /**
   * A hasher, a lookup by identity and a record of the flat instances made
   * (`flattenInstances`'s `made`) for one commit to `key` (the state's
   * stream); `done` with the commit's instances keeps what was made as the
   * state's memo. The memo keeps the commit's own flat instances, not copies:
   * a first commit of 20,000 instances made three objects per instance
   * (the flat instance, its memo entry, its entry by identity), all held
   * while its append was written.
   */
  open(key: string): {
    hash: InstanceHasher;
    known: KnownFlatInstance;
    made(flat: FlatInstance): void;
    done(instances: readonly FlatInstance[]): void;
  } {
    // peek: a state's place in line is its last commit, not its last look.
    const previous = this.states.peek(key);
    const added: FlatInstance[] = [];
    // Instances of one resource share their descriptor: compare it once.
    const sameResource = new Map<ResourceDescriptor, Set<ResourceDescriptor>>();
    const same = (a: ResourceDescriptor, b: ResourceDescriptor): boolean => {
      if (a === b) return true;
      let known = sameResource.get(a);
      if (known?.has(b)) return true;
      if (!sameDescriptor(a, b)) return false;
      if (!known) sameResource.set(a, (known = new Set()));
      known.add(b);
      return true;
    };
    const hash: InstanceHasher = (address, resource, instance) => {
      const known = previous?.get(address);
      return known !== undefined &&
        same(resource, known.resource) &&
        sameJson(instance, known.instance)
        ? known.hash
        : this.hashOf(resource, instance);
    };
    return {
      hash,
      known: (instance) => this.flats.get(instance),
      made: (flat) => {
        added.push(flat);
        this.flats.set(flat.instance, flat);
      },
      done: (instances) => {
        let memo = previous ?? new Map<string, FlatInstance>();
        for (const flat of added) memo.set(flat.address, flat);
        if (memo.size > 2 * instances.length) {
          memo = new Map();
          for (const i of instances) memo.set(i.address, i);
        }
        if (memo.size === 0) this.states.delete(key);
        // Set again even when it is the same map: its size is counted anew.
        else this.states.set(key, memo);
      },
    };
  }
}
