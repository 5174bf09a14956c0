/**
 * JSON as it travels through the domain. Object members may be `undefined`
 * so that typed documents with optional fields stay assignable; such members
 * are treated as absent, exactly as JSON.stringify treats them.
 */
export type JsonPrimitive = null | boolean | number | string;
export type JsonValue = JsonPrimitive | JsonValue[] | JsonObject;
export interface JsonObject {
  [key: string]: JsonValue | undefined;
}

export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `a.b`, `a["odd key"]`, `a[3]` — how validation messages name a place. */
export function jsonPath(parent: string, member: string | number): string {
  if (typeof member === 'number') return `${parent}[${member}]`;
  if (!/^[A-Za-z_][A-Za-z0-9_-]*$/.test(member)) return `${parent}[${JSON.stringify(member)}]`;
  return parent === '' ? member : `${parent}.${member}`;
}

/**
 * Where `value` stops being JSON (a function, bigint, NaN, class instance,
 * cycle…) as a jsonPath ('' = the value itself); null when it is plain JSON.
 */
export function findNonJson(value: unknown): string | null {
  const seen = new Set<object>();
  const walk = (v: unknown, at: string): string | null => {
    if (v === null || typeof v === 'string' || typeof v === 'boolean') return null;
    if (typeof v === 'number') return Number.isFinite(v) ? null : at;
    if (typeof v !== 'object') return at;
    if (seen.has(v)) return at;
    seen.add(v);
    try {
      if (Array.isArray(v)) {
        for (let i = 0; i < v.length; i++) {
          const bad = walk(v[i], jsonPath(at, i));
          if (bad !== null) return bad;
        }
        return null;
      }
      const proto: unknown = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null) return at;
      for (const [key, member] of Object.entries(v)) {
        if (member === undefined) continue;
        const bad = walk(member, jsonPath(at, key));
        if (bad !== null) return bad;
      }
      return null;
    } finally {
      seen.delete(v);
    }
  };
  return walk(value, '');
}

/**
 * Are `a` and `b` the same JSON, member order included? Equal values mean
 * equal canonical hashes, so this answers "would it hash the same" without
 * serialising either side. Strict: differently ordered members are unequal.
 */
export function sameJson(a: JsonValue | undefined, b: JsonValue | undefined): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameJson(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const keys = Object.keys(a);
  const others = Object.keys(b);
  if (keys.length !== others.length) return false;
  for (let i = 0; i < keys.length; i++) {
    if (keys[i] !== others[i] || !sameJson(a[keys[i]], b[keys[i]])) return false;
  }
  return true;
}
