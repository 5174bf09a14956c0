import { CtyError } from './cty-error';

/** A cty type as the schema writes it: `"string"`, `["list","number"]`, `["object",{...}]`. */
export type CtyTypeJson = string | CtyTypeJson[] | { [name: string]: CtyTypeJson };

/** A JSON value as Terraform state stores attributes (cty JSON). */
export type CtyJson = null | boolean | number | string | CtyJson[] | { [key: string]: CtyJson };

export type PrimitiveKind = 'string' | 'number' | 'bool';

export type CtyType =
  | { readonly kind: PrimitiveKind }
  | { readonly kind: 'dynamic' }
  | { readonly kind: 'list' | 'set' | 'map'; readonly element: CtyType }
  | { readonly kind: 'tuple'; readonly elements: readonly CtyType[] }
  | ObjectType;

export interface ObjectType {
  readonly kind: 'object';
  readonly attributes: Readonly<Record<string, CtyType>>;
  /** Attribute names sorted as go-cty writes them (byte order). */
  readonly names: readonly string[];
  /** Declared optional in a type constraint; only kept to write the type back. */
  readonly optional?: readonly string[];
  /**
   * What an attribute becomes when the JSON input leaves it out. Nested blocks
   * are never null in Terraform's eyes: an absent list block is `[]`.
   */
  readonly absent?: Readonly<Record<string, CtyJson>>;
}

export const STRING: CtyType = { kind: 'string' };
export const NUMBER: CtyType = { kind: 'number' };
export const BOOL: CtyType = { kind: 'bool' };
export const DYNAMIC: CtyType = { kind: 'dynamic' };

export function listOf(element: CtyType): CtyType {
  return { kind: 'list', element };
}
export function setOf(element: CtyType): CtyType {
  return { kind: 'set', element };
}
export function mapOf(element: CtyType): CtyType {
  return { kind: 'map', element };
}
export function tupleOf(elements: readonly CtyType[]): CtyType {
  return { kind: 'tuple', elements };
}
export function objectOf(
  attributes: Record<string, CtyType>,
  extra: { optional?: readonly string[]; absent?: Record<string, CtyJson> } = {},
): ObjectType {
  return {
    kind: 'object',
    attributes,
    names: Object.keys(attributes).sort(compareUtf8),
    ...(extra.optional && extra.optional.length > 0 ? { optional: extra.optional } : {}),
    ...(extra.absent && Object.keys(extra.absent).length > 0 ? { absent: extra.absent } : {}),
  };
}

/** Go compares strings by UTF-8 bytes, which is code point order, not UTF-16 order. */
export function compareUtf8(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const ca = a.charCodeAt(i);
    const cb = b.charCodeAt(i);
    if (ca === cb) continue;
    const surrogateA = ca >= 0xd800 && ca <= 0xdfff;
    const surrogateB = cb >= 0xd800 && cb <= 0xdfff;
    if (surrogateA !== surrogateB) return surrogateA ? 1 : -1;
    return ca - cb;
  }
  return a.length - b.length;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function parseCtyType(json: unknown): CtyType {
  if (typeof json === 'string') {
    switch (json) {
      case 'string':
        return STRING;
      case 'number':
        return NUMBER;
      case 'bool':
        return BOOL;
      case 'dynamic':
        return DYNAMIC;
      default:
        throw new CtyError('CTY.INVALID_TYPE', `unknown primitive type ${JSON.stringify(json)}`);
    }
  }
  if (Array.isArray(json) && typeof json[0] === 'string') {
    const [kind, arg, third] = json;
    switch (kind) {
      case 'list':
      case 'set':
      case 'map':
        if (json.length === 2) return { kind, element: parseCtyType(arg) };
        break;
      case 'tuple':
        if (json.length === 2 && Array.isArray(arg)) return tupleOf(arg.map(parseCtyType));
        break;
      case 'object':
        if ((json.length === 2 || json.length === 3) && isRecord(arg)) {
          const attributes: Record<string, CtyType> = {};
          for (const name of Object.keys(arg)) attributes[name] = parseCtyType(arg[name]);
          const optional =
            json.length === 3 && Array.isArray(third)
              ? third.filter((n): n is string => typeof n === 'string')
              : undefined;
          return objectOf(attributes, { optional });
        }
        break;
    }
  }
  throw new CtyError('CTY.INVALID_TYPE', `malformed type ${JSON.stringify(json)}`);
}

/** The type's JSON form, keys sorted, as go-cty marshals it (used inside dynamic values). */
export function ctyTypeJson(type: CtyType): CtyTypeJson {
  switch (type.kind) {
    case 'string':
    case 'number':
    case 'bool':
    case 'dynamic':
      return type.kind;
    case 'list':
    case 'set':
    case 'map':
      return [type.kind, ctyTypeJson(type.element)];
    case 'tuple':
      return ['tuple', type.elements.map(ctyTypeJson)];
    case 'object': {
      const attrs: { [name: string]: CtyTypeJson } = {};
      for (const name of type.names) attrs[name] = ctyTypeJson(type.attributes[name]);
      return type.optional
        ? ['object', attrs, [...type.optional].sort(compareUtf8)]
        : ['object', attrs];
    }
  }
}

export function containsDynamic(type: CtyType): boolean {
  switch (type.kind) {
    case 'dynamic':
      return true;
    case 'list':
    case 'set':
    case 'map':
      return containsDynamic(type.element);
    case 'tuple':
      return type.elements.some(containsDynamic);
    case 'object':
      return type.names.some((n) => containsDynamic(type.attributes[n]));
    default:
      return false;
  }
}
