import { decode, encode, ExtensionCodec } from '@msgpack/msgpack';

/** A cty type in its JSON form, exactly as it appears in schemas and dynamic values. */
export type CtyType =
  | 'string'
  | 'number'
  | 'bool'
  | 'dynamic'
  | ['list' | 'set' | 'map', CtyType]
  | ['object', { [name: string]: CtyType }]
  | ['tuple', CtyType[]];

export class Unknown {
  static readonly instance = new Unknown();
  private constructor() {}
}

/** A value of a `dynamic` slot carries its concrete type with it. */
export class Dynamic {
  constructor(
    readonly type: CtyType,
    readonly value: CtyValue,
  ) {}
}

export type CtyValue =
  null | Unknown | Dynamic | string | number | boolean | CtyValue[] | { [name: string]: CtyValue };

export type CtyObject = { [name: string]: CtyValue };

export const unknown = Unknown.instance;

const UNKNOWN_EXT = 0;
const REFINED_UNKNOWN_EXT = 12;

const extensions = new ExtensionCodec();
extensions.register({
  type: UNKNOWN_EXT,
  // go-cty writes fixext1 with a zero payload.
  encode: (input) => (input instanceof Unknown ? new Uint8Array([0]) : null),
  decode: () => unknown,
});
// Refinements (prefix, bounds) are irrelevant to a test provider: keep only "unknown".
extensions.register({ type: REFINED_UNKNOWN_EXT, encode: () => null, decode: () => unknown });

type Wire = unknown;

export function toMsgpack(type: CtyType, value: CtyValue): Uint8Array {
  return encode(toWire(type, value), { extensionCodec: extensions });
}

export function fromMsgpack(type: CtyType, bytes: Uint8Array): CtyValue {
  if (bytes.length === 0) return null;
  return fromWire(type, decode(bytes, { extensionCodec: extensions }));
}

function toWire(type: CtyType, value: CtyValue): Wire {
  if (type === 'dynamic') {
    if (value === null || value instanceof Unknown) return value;
    if (!(value instanceof Dynamic)) throw new Error('dynamic slot needs a typed value');
    return [new TextEncoder().encode(JSON.stringify(value.type)), toWire(value.type, value.value)];
  }
  if (value === null || value instanceof Unknown) return value;
  if (typeof type === 'string') return value;
  const [kind, inner] = type;
  switch (kind) {
    case 'list':
    case 'set':
      return asArray(value).map((v) => toWire(inner, v));
    case 'tuple':
      return asArray(value).map((v, i) => toWire(inner[i], v));
    case 'map': {
      const record = asRecord(value);
      return sortedRecord(Object.keys(record), (k) => toWire(inner, record[k]));
    }
    case 'object': {
      const record = asRecord(value);
      // Every attribute must be present: the receiver checks the exact count.
      return sortedRecord(Object.keys(inner), (k) => toWire(inner[k], record[k] ?? null));
    }
  }
}

function fromWire(type: CtyType, wire: Wire): CtyValue {
  if (wire === null || wire === undefined) return null;
  if (wire instanceof Unknown) return unknown;
  if (type === 'dynamic') {
    const [typeBytes, inner] = wire as [Uint8Array, Wire];
    const concrete = JSON.parse(new TextDecoder().decode(typeBytes)) as CtyType;
    return new Dynamic(concrete, fromWire(concrete, inner));
  }
  // Numbers may arrive as int, float or a decimal string (arbitrary precision).
  if (type === 'number') return Number(wire);
  if (typeof type === 'string') return wire as string | boolean;
  const [kind, inner] = type;
  switch (kind) {
    case 'list':
    case 'set':
      return (wire as Wire[]).map((v) => fromWire(inner, v));
    case 'tuple':
      return (wire as Wire[]).map((v, i) => fromWire(inner[i], v));
    case 'map': {
      const record = wire as Record<string, Wire>;
      return sortedRecord(Object.keys(record), (k) => fromWire(inner, record[k]));
    }
    case 'object': {
      const record = wire as Record<string, Wire>;
      return sortedRecord(Object.keys(inner), (k) => fromWire(inner[k], record[k]));
    }
  }
}

/** cty JSON, the form Terraform writes into state files and hands to UpgradeResourceState. */
export function toCtyJson(type: CtyType, value: CtyValue): unknown {
  if (value instanceof Unknown) throw new Error('unknown values have no JSON form');
  if (type === 'dynamic') {
    if (value === null) return null;
    const dyn = value as Dynamic;
    return { value: toCtyJson(dyn.type, dyn.value), type: dyn.type };
  }
  if (value === null || typeof type === 'string') return value;
  const [kind, inner] = type;
  switch (kind) {
    case 'list':
    case 'set':
      return asArray(value).map((v) => toCtyJson(inner, v));
    case 'tuple':
      return asArray(value).map((v, i) => toCtyJson(inner[i], v));
    case 'map': {
      const record = asRecord(value);
      return sortedRecord(Object.keys(record), (k) => toCtyJson(inner, record[k]));
    }
    case 'object': {
      const record = asRecord(value);
      return sortedRecord(Object.keys(inner), (k) => toCtyJson(inner[k], record[k] ?? null));
    }
  }
}

/** Lenient: missing attributes become null, unknown attributes are dropped. */
export function fromCtyJson(type: CtyType, json: unknown): CtyValue {
  if (json === null || json === undefined) return null;
  if (type === 'dynamic') {
    const { value, type: concrete } = json as { value: unknown; type: CtyType };
    return new Dynamic(concrete, fromCtyJson(concrete, value));
  }
  if (type === 'number') return Number(json);
  if (typeof type === 'string') return json as string | boolean;
  const [kind, inner] = type;
  switch (kind) {
    case 'list':
    case 'set':
      return (json as unknown[]).map((v) => fromCtyJson(inner, v));
    case 'tuple':
      return (json as unknown[]).map((v, i) => fromCtyJson(inner[i], v));
    case 'map': {
      const record = json as Record<string, unknown>;
      return sortedRecord(Object.keys(record), (k) => fromCtyJson(inner, record[k]));
    }
    case 'object': {
      const record = json as Record<string, unknown>;
      return sortedRecord(Object.keys(inner), (k) => fromCtyJson(inner[k], record[k]));
    }
  }
}

function asArray(value: CtyValue): CtyValue[] {
  if (!Array.isArray(value)) throw new Error('expected a list, set or tuple');
  return value;
}

function asRecord(value: CtyValue): CtyObject {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new Error('expected an object or map');
  }
  return value as CtyObject;
}

function sortedRecord<T>(keys: string[], valueOf: (key: string) => T): Record<string, T> {
  const out: Record<string, T> = {};
  for (const key of [...keys].sort()) out[key] = valueOf(key);
  return out;
}
