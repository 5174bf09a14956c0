import { AttributePath, PathStep, renderPath } from './attribute-path';
import { CtyError } from './cty-error';
import { compareUtf8, CtyJson, CtyType, ctyTypeJson, parseCtyType } from './cty-type';
import { MsgpackReader, MsgpackToken } from './msgpack-reader';
import { MsgpackWriter } from './msgpack-writer';
import { bigNumberText, isBigNumber, numberFromText } from '../terraform/lossless-json';
import {
  WireNumber,
  wireNumberFromBigInt,
  wireNumberFromJs,
  wireNumberFromText,
} from './cty-number';

/**
 * Schema-driven conversion between cty JSON (how Terraform state stores
 * attributes) and cty msgpack (how DynamicValue carries them to providers).
 * Objects always carry every attribute of their type, keys sorted; a
 * dynamically-typed value travels as `[type JSON bytes, value]` and appears in
 * JSON as `{ "value": …, "type": … }`, as in state files. A number a double
 * cannot hold is a marked string on the JSON side, as lossless parsing of a
 * document gives it (see lossless-json), so a value read back from a
 * provider hashes and compares like the one the document held.
 */
export function encodeMsgpack(type: CtyType, value: unknown): Uint8Array {
  // Encoding is synchronous, so one writer serves every call; bytes() copies out.
  const w = scratch;
  w.reset();
  encode(w, type, value, null);
  return w.bytes();
}

const scratch = new MsgpackWriter();

export function decodeMsgpack(type: CtyType, bytes: Uint8Array): CtyJson {
  const r = new MsgpackReader(bytes);
  const value = decode(r, type, r.next(), null);
  if (!r.done) throw new CtyError('CTY.MALFORMED_MSGPACK', 'trailing bytes after the value');
  return value;
}

/**
 * A path built parent-first, one link per step, and made into steps only
 * when an error needs it: a value's every attribute and element gets a link,
 * so a link is one small object (not a step object as well).
 */
type PathNode = {
  readonly parent: PathNode;
  readonly kind: PathStep['kind'];
  readonly label: string | number;
} | null;

function at(parent: PathNode, kind: 'attribute' | 'key', label: string): PathNode;
function at(parent: PathNode, kind: 'index', label: number): PathNode;
function at(parent: PathNode, kind: PathStep['kind'], label: string | number): PathNode {
  return { parent, kind, label };
}

function toPath(node: PathNode): AttributePath {
  const steps: PathStep[] = [];
  for (let n = node; n; n = n.parent) {
    steps.push(
      n.kind === 'index'
        ? { kind: 'index', index: n.label as number }
        : n.kind === 'key'
          ? { kind: 'key', key: n.label as string }
          : { kind: 'attribute', name: n.label as string },
    );
  }
  return steps.reverse();
}

function fail(
  code: 'CTY.TYPE_MISMATCH' | 'CTY.UNSUPPORTED_ATTRIBUTE' | 'CTY.UNKNOWN_VALUE',
  message: string,
  path: PathNode,
): never {
  throw new CtyError(code, message, renderPath(toPath(path)));
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);
}

function own(o: Record<string, unknown>, k: string): boolean {
  return Object.prototype.hasOwnProperty.call(o, k);
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  return `a ${typeof v}`;
}

const utf8 = new TextEncoder();

function encode(w: MsgpackWriter, type: CtyType, v: unknown, path: PathNode): void {
  if (v === null || v === undefined) return w.nil();
  switch (type.kind) {
    case 'string':
      // The primitive conversions cty applies to configuration values.
      if (isBigNumber(v)) return w.string(bigNumberText(v));
      if (typeof v === 'string') return w.string(v);
      if (typeof v === 'boolean') return w.string(v ? 'true' : 'false');
      if (typeof v === 'number' && Number.isFinite(v)) return w.string(String(v));
      if (typeof v === 'bigint') return w.string(v.toString());
      return fail('CTY.TYPE_MISMATCH', `string required, got ${describe(v)}`, path);
    case 'bool':
      if (typeof v === 'boolean') return w.bool(v);
      if (v === 'true' || v === 'false') return w.bool(v === 'true');
      return fail('CTY.TYPE_MISMATCH', `bool required, got ${describe(v)}`, path);
    case 'number': {
      let n: WireNumber | null = null;
      if (typeof v === 'number') n = wireNumberFromJs(v);
      else if (typeof v === 'bigint') n = wireNumberFromBigInt(v);
      else if (isBigNumber(v)) n = wireNumberFromText(bigNumberText(v));
      else if (typeof v === 'string') n = wireNumberFromText(v);
      if (!n) return fail('CTY.TYPE_MISMATCH', `number required, got ${describe(v)}`, path);
      if (n.kind === 'int') return w.int(n.value);
      if (n.kind === 'float') return w.float64(n.value);
      return w.string(n.value);
    }
    case 'list':
    case 'set': {
      if (!Array.isArray(v)) {
        return fail('CTY.TYPE_MISMATCH', `${type.kind} required, got ${describe(v)}`, path);
      }
      w.arrayHeader(v.length);
      v.forEach((item, i) => encode(w, type.element, item, at(path, 'index', i)));
      return;
    }
    case 'tuple': {
      if (!Array.isArray(v) || v.length !== type.elements.length) {
        return fail(
          'CTY.TYPE_MISMATCH',
          `tuple of ${type.elements.length} elements required`,
          path,
        );
      }
      w.arrayHeader(v.length);
      v.forEach((item, i) => encode(w, type.elements[i], item, at(path, 'index', i)));
      return;
    }
    case 'map': {
      if (!isRecord(v)) return fail('CTY.TYPE_MISMATCH', `map required, got ${describe(v)}`, path);
      const keys = Object.keys(v).sort(compareUtf8);
      w.mapHeader(keys.length);
      for (const k of keys) {
        w.string(k);
        encode(w, type.element, v[k], at(path, 'key', k));
      }
      return;
    }
    case 'object': {
      if (!isRecord(v))
        return fail('CTY.TYPE_MISMATCH', `object required, got ${describe(v)}`, path);
      for (const k of Object.keys(v)) {
        if (!own(type.attributes, k)) {
          fail('CTY.UNSUPPORTED_ATTRIBUTE', `unsupported attribute "${k}"`, path);
        }
      }
      w.mapHeader(type.names.length);
      for (const name of type.names) {
        w.string(name);
        const value = own(v, name)
          ? v[name]
          : type.absent && own(type.absent, name)
            ? type.absent[name]
            : null;
        encode(w, type.attributes[name], value, at(path, 'attribute', name));
      }
      return;
    }
    case 'dynamic': {
      if (!isRecord(v) || !own(v, 'type') || !own(v, 'value') || Object.keys(v).length !== 2) {
        return fail(
          'CTY.TYPE_MISMATCH',
          'a dynamic value must be written as {"value": …, "type": …}',
          path,
        );
      }
      let concrete: CtyType;
      try {
        concrete = parseCtyType(v.type);
      } catch (e) {
        return fail('CTY.TYPE_MISMATCH', (e as Error).message, path);
      }
      if (concrete.kind === 'dynamic') {
        return fail('CTY.TYPE_MISMATCH', 'a dynamic value needs a concrete type', path);
      }
      // The type goes first even when the value is null: go-cty reads a typed null that way.
      w.arrayHeader(2);
      w.binary(utf8.encode(JSON.stringify(ctyTypeJson(concrete))));
      encode(w, concrete, v.value, path);
      return;
    }
  }
}

const textDecoder = new TextDecoder('utf-8', { fatal: true });

function mismatch(type: CtyType, tok: MsgpackToken, path: PathNode): never {
  return fail('CTY.TYPE_MISMATCH', `expected ${type.kind}, found msgpack ${tok.t}`, path);
}

function decode(r: MsgpackReader, type: CtyType, tok: MsgpackToken, path: PathNode): CtyJson {
  if (tok.t === 'nil') return null;
  // ext 0 is go-cty's unknown, ext 12 a refined unknown; a state never holds either.
  if (tok.t === 'ext') return fail('CTY.UNKNOWN_VALUE', 'unknown values are not accepted', path);
  switch (type.kind) {
    case 'string':
      if (tok.t !== 'str') return mismatch(type, tok, path);
      return tok.v;
    case 'bool':
      if (tok.t !== 'bool') return mismatch(type, tok, path);
      return tok.v;
    case 'number':
      return decodeNumber(tok, path);
    case 'list':
    case 'set': {
      if (tok.t !== 'array') return mismatch(type, tok, path);
      const out: CtyJson[] = new Array<CtyJson>(tok.n);
      for (let i = 0; i < tok.n; i++) {
        out[i] = decode(r, type.element, r.next(), at(path, 'index', i));
      }
      return out;
    }
    case 'tuple': {
      if (tok.t !== 'array' || tok.n !== type.elements.length) return mismatch(type, tok, path);
      return type.elements.map((t, i) => decode(r, t, r.next(), at(path, 'index', i)));
    }
    case 'map': {
      if (tok.t !== 'map') return mismatch(type, tok, path);
      const entries: [string, CtyJson][] = [];
      for (let i = 0; i < tok.n; i++) {
        const k = readKey(r, path);
        entries.push([k, decode(r, type.element, r.next(), at(path, 'key', k))]);
      }
      return Object.fromEntries(entries);
    }
    case 'object': {
      if (tok.t !== 'map') return mismatch(type, tok, path);
      // Every attribute of the type, in the type's order, null until the map names it.
      const out: { [name: string]: CtyJson } = {};
      for (const name of type.names) setMember(out, name, null);
      for (let i = 0; i < tok.n; i++) {
        const k = readKey(r, path);
        if (!own(type.attributes, k)) {
          fail('CTY.UNSUPPORTED_ATTRIBUTE', `unsupported attribute "${k}"`, path);
        }
        setMember(out, k, decode(r, type.attributes[k], r.next(), at(path, 'attribute', k)));
      }
      return out;
    }
    case 'dynamic': {
      if (tok.t !== 'array' || tok.n !== 2) {
        return fail('CTY.TYPE_MISMATCH', 'dynamic value must be [type, value]', path);
      }
      const typeTok = r.next();
      let typeJson: unknown;
      try {
        if (typeTok.t === 'bin') typeJson = JSON.parse(textDecoder.decode(typeTok.v));
        else if (typeTok.t === 'str') typeJson = JSON.parse(typeTok.v);
        else throw new Error(`type is msgpack ${typeTok.t}`);
      } catch (e) {
        return fail('CTY.TYPE_MISMATCH', `malformed dynamic type: ${(e as Error).message}`, path);
      }
      const concrete = parseCtyType(typeJson);
      return { value: decode(r, concrete, r.next(), path), type: ctyTypeJson(concrete) as CtyJson };
    }
  }
}

/** An own member even for "__proto__", which plain assignment would take as the prototype. */
function setMember(out: { [name: string]: CtyJson }, name: string, value: CtyJson): void {
  if (name === '__proto__') {
    Object.defineProperty(out, name, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  } else out[name] = value;
}

function readKey(r: MsgpackReader, path: PathNode): string {
  const k = r.next();
  if (k.t !== 'str')
    return fail('CTY.TYPE_MISMATCH', `map key must be a string, found ${k.t}`, path);
  return k.v;
}

function decodeNumber(tok: MsgpackToken, path: PathNode): CtyJson {
  switch (tok.t) {
    case 'int': {
      const n = Number(tok.v);
      // Beyond 2^53 a JS number would lose digits; the marked text keeps them.
      return Number.isSafeInteger(n) ? n : numberFromText(tok.v.toString());
    }
    case 'float':
      if (!Number.isFinite(tok.v)) {
        return fail('CTY.TYPE_MISMATCH', `${tok.v} cannot be represented in JSON`, path);
      }
      return tok.v;
    case 'str': {
      const n = wireNumberFromText(tok.v);
      if (!n) return fail('CTY.TYPE_MISMATCH', `"${tok.v}" is not a number`, path);
      if (n.kind === 'float') return n.value;
      if (n.kind === 'int' && Number.isSafeInteger(Number(n.value))) return Number(n.value);
      return numberFromText(n.kind === 'decimal' ? n.value : n.value.toString());
    }
    default:
      return fail('CTY.TYPE_MISMATCH', `expected number, found msgpack ${tok.t}`, path);
  }
}
