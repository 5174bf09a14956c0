import { JsonValue } from './json-value';

/**
 * One spelling per JSON value: object keys sorted, no whitespace, array order
 * kept, `undefined` members dropped. Two documents that differ only in key
 * order or formatting have the same canonical form.
 */
export function canonicalJson(value: JsonValue): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  // The native JSON.stringify spells the canonical form of a value whose
  // objects all enumerate their keys in sorted order, many times faster than
  // assembling it member by member here. Most of a terraform state already
  // is in that order (cty writes attributes with sorted keys); the rest
  // (instance objects, dynamic values' {"value", "type"}) is copied in
  // order, the copy sharing every subtree that needs none, and written with
  // one native pass.
  const ordered = inKeyOrder(value);
  return ordered === UNORDERABLE ? byHand(value) : JSON.stringify(ordered);
}

/** An object no copy can enumerate in sorted key order (see inKeyOrder). */
const UNORDERABLE: unique symbol = Symbol('unorderable');

/**
 * `value` itself if every object below it enumerates its keys in sorted
 * order; else a copy whose objects do, sharing the subtrees that already
 * did. UNORDERABLE when an object cannot: integer-like keys enumerate first,
 * in numeric order, whatever the insertion order ("10" sorts before "9").
 */
function inKeyOrder(value: JsonValue): JsonValue | typeof UNORDERABLE {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    let copy: JsonValue[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const item = value[i];
      const ordered = inKeyOrder(item);
      if (ordered === UNORDERABLE) return UNORDERABLE;
      if (copy === undefined && ordered !== item) copy = value.slice(0, i);
      copy?.push(ordered);
    }
    return copy ?? value;
  }
  const keys = Object.keys(value);
  let sorted = true;
  for (let i = 1; i < keys.length; i++) {
    if (!(keys[i - 1] < keys[i])) {
      sorted = false;
      break;
    }
  }
  if (!sorted) sortKeys(keys);
  let copy: Record<string, JsonValue> | undefined = sorted ? undefined : {};
  for (let i = 0; i < keys.length; i++) {
    const member = value[keys[i]];
    if (member === undefined) continue;
    const ordered = inKeyOrder(member);
    if (ordered === UNORDERABLE) return UNORDERABLE;
    if (copy === undefined && ordered !== member) {
      copy = {};
      for (let j = 0; j < i; j++) {
        const before = value[keys[j]];
        if (before !== undefined) setMember(copy, keys[j], before);
      }
    }
    if (copy !== undefined) setMember(copy, keys[i], ordered);
  }
  if (copy === undefined) return value;
  // Only integer-like keys enumerate out of insertion order, and those start
  // with a digit: without one, the copy is in order as built.
  if (!sorted && keys.some(startsWithDigit) && !enumeratesInOrder(copy)) return UNORDERABLE;
  return copy;
}

function startsWithDigit(key: string): boolean {
  const c = key.charCodeAt(0);
  return c >= 0x30 && c <= 0x39;
}

/**
 * Sorts keys in place in code-unit order, as `keys.sort()` does: by
 * insertion for the few keys of most objects (the built-in sort allocates
 * its work arrays for each call, tens of thousands of calls per first
 * commit), by the built-in sort for long lists.
 */
function sortKeys(keys: string[]): void {
  if (keys.length > 16) {
    keys.sort();
    return;
  }
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i];
    let j = i - 1;
    for (; j >= 0 && keys[j] > key; j--) keys[j + 1] = keys[j];
    keys[j + 1] = key;
  }
}

/**
 * `object[key] = member`, also for an own "__proto__" member (JSON.parse
 * makes them), which a plain assignment would take for the prototype. (A
 * null-prototype copy would not need this, but such objects are
 * dictionaries, several times slower to build and to stringify.)
 */
function setMember(object: Record<string, JsonValue>, key: string, member: JsonValue): void {
  if (key === '__proto__') {
    Object.defineProperty(object, key, {
      value: member,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  } else {
    object[key] = member;
  }
}

/** Does the object enumerate its keys in sorted order? */
function enumeratesInOrder(object: object): boolean {
  const keys = Object.keys(object);
  for (let i = 1; i < keys.length; i++) if (!(keys[i - 1] < keys[i])) return false;
  return true;
}

/** The canonical form assembled member by member: for objects inKeyOrder cannot order. */
function byHand(value: JsonValue): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(byHand).join(',')}]`;
  const members: string[] = [];
  for (const key of Object.keys(value).sort()) {
    const member = value[key];
    if (member === undefined) continue;
    members.push(`${JSON.stringify(key)}:${byHand(member)}`);
  }
  return `{${members.join(',')}}`;
}
