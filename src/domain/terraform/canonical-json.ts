import { JsonValue } from './json-value';

/**
 * One spelling per JSON value: object keys sorted, no whitespace, array order
 * kept, `undefined` members dropped. Two documents that differ only in key
 * order or formatting have the same canonical form.
 */
export function canonicalJson(value: JsonValue): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  // Most of a terraform state is already in canonical order (cty writes
  // attributes with sorted keys), and for such a subtree the native
  // JSON.stringify spells exactly the canonical form, many times faster
  // than assembling it here.
  if (inSortedOrder(value)) return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const members: string[] = [];
  for (const key of Object.keys(value).sort()) {
    const member = value[key];
    if (member === undefined) continue;
    members.push(`${JSON.stringify(key)}:${canonicalJson(member)}`);
  }
  return `{${members.join(',')}}`;
}

/**
 * Does every object below `value` enumerate its keys in sorted order? Then
 * JSON.stringify writes them sorted. (Integer-like keys enumerate first, in
 * numeric order, whatever the insertion order: "10" before "9" fails here
 * and takes the explicit path.)
 */
function inSortedOrder(value: JsonValue): boolean {
  if (value === null || typeof value !== 'object') return true;
  if (Array.isArray(value)) {
    for (const item of value) if (!inSortedOrder(item)) return false;
    return true;
  }
  const keys = Object.keys(value);
  for (let i = 0; i < keys.length; i++) {
    if (i > 0 && !(keys[i - 1] < keys[i])) return false;
    if (!inSortedOrder(value[keys[i]] as JsonValue)) return false;
  }
  return true;
}
