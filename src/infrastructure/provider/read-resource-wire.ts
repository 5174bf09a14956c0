import type * as protobuf from 'protobufjs/light';
import type { PluginMethod } from './plugin-protos';

/**
 * ReadResource's request and response written and read directly, for the
 * refresh's one call per instance: through protobufjs's `fromObject`,
 * `encode`, `decode` and `toObject` the four steps cost kl about as much CPU
 * per read as the call's HTTP/2 stream (docs/performance-history.md, "Refresh
 * (wave 26)"). The request is four known fields, so it is written straight
 * into one buffer, with the same bytes as protobufjs writes (the spec compares
 * them). The usual answer is a new state and its private bytes; any other
 * answer (diagnostics, a deferral, a field this reader does not know, a field
 * given twice) goes to the generic decoder, so what the caller sees is exactly
 * the generic decoder's object in every case.
 *
 * Both protocols (tfplugin5 and tfplugin6) number these messages alike; the
 * fast path is only taken when the loaded descriptor says so (`readResourceWire`
 * checks every field number and type it relies on).
 */

// Field tags: (field number << 3) | wire type; wire type 2 is length-delimited, 0 a varint.
const TYPE_NAME = (1 << 3) | 2;
const CURRENT_STATE = (2 << 3) | 2;
const PRIVATE = (3 << 3) | 2;
const CLIENT_CAPABILITIES = (5 << 3) | 2;
const MSGPACK = (1 << 3) | 2;
const JSON_VALUE = (2 << 3) | 2;
const DEFERRAL_ALLOWED = (1 << 3) | 0;
const WRITE_ONLY_ALLOWED = (2 << 3) | 0;
const NEW_STATE = (1 << 3) | 2;

/** The fields the fast path relies on, as the descriptor must declare them. */
const EXPECTED: Record<string, [string, number, string][]> = {
  request: [
    ['type_name', 1, 'string'],
    ['current_state', 2, 'DynamicValue'],
    ['private', 3, 'bytes'],
    ['provider_meta', 4, 'DynamicValue'],
    ['client_capabilities', 5, 'ClientCapabilities'],
  ],
  response: [
    ['new_state', 1, 'DynamicValue'],
    ['diagnostics', 2, 'Diagnostic'],
    ['private', 3, 'bytes'],
    ['deferred', 4, 'Deferred'],
  ],
  DynamicValue: [
    ['msgpack', 1, 'bytes'],
    ['json', 2, 'bytes'],
  ],
  ClientCapabilities: [
    ['deferral_allowed', 1, 'bool'],
    ['write_only_attributes_allowed', 2, 'bool'],
  ],
};

interface ReadRequest {
  type_name: string;
  current_state: { msgpack: Uint8Array };
  private?: Uint8Array;
  client_capabilities?: { deferral_allowed: boolean; write_only_attributes_allowed: boolean };
}

/**
 * `method` (ReadResource of either protocol) with the direct request writer
 * and response reader, or `method` itself when its messages are not numbered
 * as this module expects.
 */
export function readResourceWire(
  method: PluginMethod,
  request: protobuf.Type,
  response: protobuf.Type,
): PluginMethod {
  const dynamicValue = request.fields.current_state?.resolvedType;
  const capabilities = request.fields.client_capabilities?.resolvedType;
  const matches = (type: protobuf.ReflectionObject | null | undefined, key: string): boolean =>
    !!type &&
    EXPECTED[key].every(([name, id, fieldType]) => {
      const field = (type as protobuf.Type).fields[name];
      return (
        field?.id === id && field.type === fieldType && field.repeated === (name === 'diagnostics')
      );
    }) &&
    Object.keys((type as protobuf.Type).fields).length === EXPECTED[key].length;
  if (
    !matches(request, 'request') ||
    !matches(response, 'response') ||
    !matches(dynamicValue, 'DynamicValue') ||
    !matches(capabilities, 'ClientCapabilities') ||
    response.fields.new_state.resolvedType !== dynamicValue
  ) {
    return method;
  }
  const generic = { serialize: method.requestSerialize, deserialize: method.responseDeserialize };
  return {
    ...method,
    requestSerialize: (value) => encodeReadRequest(value) ?? generic.serialize(value),
    responseDeserialize: (bytes) => decodeReadResponse(bytes) ?? generic.deserialize(bytes),
  };
}

/** The request's bytes, or undefined for a request of any other shape (the generic encoder writes it). */
export function encodeReadRequest(value: object): Buffer | undefined {
  if (!isPlainRead(value)) return undefined;
  const name = Buffer.from(value.type_name, 'utf8');
  const msgpack = value.current_state.msgpack;
  const priv = value.private;
  const caps = value.client_capabilities;
  const stateBody = 1 + varintSize(msgpack.length) + msgpack.length;
  const size =
    1 +
    varintSize(name.length) +
    name.length +
    1 +
    varintSize(stateBody) +
    stateBody +
    (priv ? 1 + varintSize(priv.length) + priv.length : 0) +
    (caps ? 6 : 0);
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  out[at++] = TYPE_NAME;
  at = writeVarint(out, at, name.length);
  at += name.copy(out, at);
  out[at++] = CURRENT_STATE;
  at = writeVarint(out, at, stateBody);
  out[at++] = MSGPACK;
  at = writeVarint(out, at, msgpack.length);
  out.set(msgpack, at);
  at += msgpack.length;
  if (priv) {
    out[at++] = PRIVATE;
    at = writeVarint(out, at, priv.length);
    out.set(priv, at);
    at += priv.length;
  }
  if (caps) {
    // Both booleans are written even when false, as protobufjs writes a field that was set.
    out[at++] = CLIENT_CAPABILITIES;
    out[at++] = 4;
    out[at++] = DEFERRAL_ALLOWED;
    out[at++] = caps.deferral_allowed ? 1 : 0;
    out[at++] = WRITE_ONLY_ALLOWED;
    out[at++] = caps.write_only_attributes_allowed ? 1 : 0;
  }
  return out;
}

/**
 * The response as the generic decoder's object (defaults filled in), or
 * undefined when it holds anything but a new state (msgpack and/or json) and
 * private bytes, each at most once.
 */
export function decodeReadResponse(bytes: Buffer): object | undefined {
  let newState: { msgpack: Buffer; json: Buffer } | null = null;
  let priv: Buffer | undefined;
  let at = 0;
  while (at < bytes.length) {
    const tag = bytes[at++];
    if (tag !== NEW_STATE && tag !== PRIVATE) return undefined;
    const field = readLength(bytes, at);
    if (!field) return undefined;
    const [start, end] = field;
    at = end;
    if (tag === PRIVATE) {
      if (priv) return undefined;
      priv = bytes.subarray(start, end);
      continue;
    }
    if (newState) return undefined;
    const state = decodeDynamicValue(bytes, start, end);
    if (!state) return undefined;
    newState = state;
  }
  return { new_state: newState, diagnostics: [], private: priv ?? EMPTY, deferred: null };
}

const EMPTY = Buffer.alloc(0);

function decodeDynamicValue(
  bytes: Buffer,
  from: number,
  to: number,
): { msgpack: Buffer; json: Buffer } | undefined {
  let msgpack: Buffer | undefined;
  let json: Buffer | undefined;
  let at = from;
  while (at < to) {
    const tag = bytes[at++];
    if (tag !== MSGPACK && tag !== JSON_VALUE) return undefined;
    const field = readLength(bytes, at, to);
    if (!field) return undefined;
    at = field[1];
    const value = bytes.subarray(field[0], field[1]);
    if (tag === MSGPACK) {
      if (msgpack) return undefined;
      msgpack = value;
    } else {
      if (json) return undefined;
      json = value;
    }
  }
  return { msgpack: msgpack ?? EMPTY, json: json ?? EMPTY };
}

/** [start, end) of the length-delimited value whose length varint starts at `at`, or undefined past `limit`. */
function readLength(bytes: Buffer, at: number, limit = bytes.length): [number, number] | undefined {
  let length = 0;
  for (let shift = 0; ; shift += 7) {
    // Four bytes of varint (28 bits) is 256 MiB, the client's message limit.
    if (at >= limit || shift > 21) return undefined;
    const b = bytes[at++];
    length += (b & 0x7f) * 2 ** shift;
    if (b < 0x80) break;
  }
  const end = at + length;
  return end <= limit ? [at, end] : undefined;
}

function isPlainRead(value: object): value is ReadRequest {
  const v = value as Partial<ReadRequest> & Record<string, unknown>;
  for (const key in v) {
    if (
      key !== 'type_name' &&
      key !== 'current_state' &&
      key !== 'private' &&
      key !== 'client_capabilities'
    ) {
      return false;
    }
  }
  const state = v.current_state as Record<string, unknown> | undefined;
  if (typeof v.type_name !== 'string' || !state || !(state.msgpack instanceof Uint8Array)) {
    return false;
  }
  for (const key in state) if (key !== 'msgpack') return false;
  if (v.private !== undefined && !(v.private instanceof Uint8Array)) return false;
  const caps = v.client_capabilities as Record<string, unknown> | undefined;
  if (caps === undefined) return true;
  for (const key in caps) {
    if (key !== 'deferral_allowed' && key !== 'write_only_attributes_allowed') return false;
  }
  return (
    typeof caps.deferral_allowed === 'boolean' &&
    typeof caps.write_only_attributes_allowed === 'boolean'
  );
}

function varintSize(n: number): number {
  let size = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    size++;
  }
  return size;
}

function writeVarint(out: Buffer, at: number, n: number): number {
  while (n >= 0x80) {
    out[at++] = (n & 0x7f) | 0x80;
    n = Math.floor(n / 128);
  }
  out[at++] = n;
  return at;
}
