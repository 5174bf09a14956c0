/**
 * A map whose copy costs what changed since its base, not its size: a frozen
 * base map and three small layers (values changed, base keys removed, keys
 * added). It behaves exactly like a `Map`, iteration order included (a key
 * set again keeps its place; one deleted and set again goes last), so a state
 * copied per commit and changed in a few places costs those places.
 *
 * `copy()` shares the base and copies the layers; once the layers outgrow
 * about 4·√size entries it folds them into a new base instead, so a copy
 * costs O(√n · change) amortised rather than O(n).
 */
export class LayeredMap<K, V> implements ReadonlyMap<K, V> {
  private constructor(
    /** Never changed once a LayeredMap holds it. */
    private readonly base: ReadonlyMap<K, V>,
    /** Base keys whose value was set again (their place stays). */
    private readonly changed: Map<K, V>,
    /** Base keys deleted (and not since set again in place: see `added`). */
    private readonly removed: Set<K>,
    /** Keys not in the base, or deleted from it and set again, in insertion order. */
    private readonly added: Map<K, V>,
  ) {}

  static of<K, V>(entries: Iterable<readonly [K, V]> = []): LayeredMap<K, V> {
    return new LayeredMap(new Map(entries), new Map(), new Set(), new Map());
  }

  /** An independent copy: changes to either are not seen by the other. */
  copy(): LayeredMap<K, V> {
    const layers = this.changed.size + this.removed.size + this.added.size;
    if (layers > 64 + 4 * Math.sqrt(this.base.size)) return LayeredMap.of(this);
    return new LayeredMap(
      this.base,
      new Map(this.changed),
      new Set(this.removed),
      new Map(this.added),
    );
  }

  get size(): number {
    return this.base.size - this.removed.size + this.added.size;
  }

  has(key: K): boolean {
    return this.added.has(key) || (!this.removed.has(key) && this.base.has(key));
  }

  get(key: K): V | undefined {
    if (this.added.has(key)) return this.added.get(key);
    if (this.removed.has(key)) return undefined;
    if (this.changed.has(key)) return this.changed.get(key);
    return this.base.get(key);
  }

  set(key: K, value: V): this {
    if (this.added.has(key) || this.removed.has(key) || !this.base.has(key)) {
      this.added.set(key, value);
    } else {
      this.changed.set(key, value);
    }
    return this;
  }

  delete(key: K): boolean {
    if (this.added.delete(key)) return true;
    if (this.removed.has(key) || !this.base.has(key)) return false;
    this.removed.add(key);
    this.changed.delete(key);
    return true;
  }

  *entries(): MapIterator<[K, V]> {
    for (const [key, value] of this.base) {
      if (this.removed.has(key)) continue;
      yield [key, this.changed.has(key) ? (this.changed.get(key) as V) : value];
    }
    yield* this.added;
  }

  *keys(): MapIterator<K> {
    for (const [key] of this.entries()) yield key;
  }

  *values(): MapIterator<V> {
    for (const [, value] of this.entries()) yield value;
  }

  [Symbol.iterator](): MapIterator<[K, V]> {
    return this.entries();
  }

  forEach(each: (value: V, key: K, map: ReadonlyMap<K, V>) => void, thisArg?: unknown): void {
    for (const [key, value] of this.entries()) each.call(thisArg, value, key, this);
  }
}
