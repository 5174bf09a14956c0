import { canonicalHash } from './canonical-hash';
import { canonicalJson } from './canonical-json';
import { JsonValue } from './json-value';

describe('canonicalJson', () => {
  it('sorts keys at every depth, keeps array order and drops whitespace', () => {
    const value = { b: 1, a: { d: [3, 1, { z: true, y: null }], c: 'x' } };
    expect(canonicalJson(value)).toBe('{"a":{"c":"x","d":[3,1,{"y":null,"z":true}]},"b":1}');
  });

  it('drops undefined members like JSON.stringify does', () => {
    expect(canonicalJson({ a: undefined, b: 1 })).toBe('{"b":1}');
  });

  it('escapes strings as JSON', () => {
    expect(canonicalJson({ 'k"': 'line\nbreak ünï 😀' })).toBe('{"k\\"":"line\\nbreak ünï 😀"}');
  });
});

describe('canonicalHash', () => {
  const base = { id: 'i-1', tags: { Name: 'web', Env: 'prod' }, ports: [80, 443], enabled: true };

  it('is a sha256 hex digest', () => {
    expect(canonicalHash(base)).toMatch(/^[0-9a-f]{64}$/);
  });

  it('ignores key order and formatting', () => {
    const text =
      '{\n  "ports" : [ 80,\n 443 ],\n\t"enabled": true, "tags": {"Env":"prod","Name":"web"},"id":"i-1"}';
    expect(canonicalHash(JSON.parse(text) as JsonValue)).toBe(canonicalHash(base));
  });

  it.each<[string, JsonValue]>([
    ['a changed value', { ...base, id: 'i-2' }],
    ['a changed nested value', { ...base, tags: { Name: 'web', Env: 'dev' } }],
    ['a reordered array', { ...base, ports: [443, 80] }],
    ['a number turned into a string', { ...base, ports: [80, '443'] }],
    ['an added null member', { ...base, extra: null }],
    ['a removed member', { id: 'i-1', tags: base.tags, ports: base.ports }],
  ])('changes with %s', (_label, changed) => {
    expect(canonicalHash(changed)).not.toBe(canonicalHash(base));
  });
});
