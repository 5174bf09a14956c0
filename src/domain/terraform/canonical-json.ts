import { JsonValue } from './json-value';

/**
 * One spelling per JSON value: object keys sorted, no whitespace, array order
 * kept, `undefined` members dropped. Two documents that differ only in key
 * order or formatting have the same canonical form.
 */
export function canonicalJson(value: JsonValue): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const members: string[] = [];
  for (const key of Object.keys(value).sort()) {
    const member = value[key];
    if (member === undefined) continue;
    members.push(`${JSON.stringify(key)}:${canonicalJson(member)}`);
  }
  return `{${members.join(',')}}`;
}
