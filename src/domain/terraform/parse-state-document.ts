import { parseJsonLossless } from './lossless-json';
import { DomainError } from '../shared/domain-error';
import { keyProblem, textProblem, utf8Length, MAX_KEY_BYTES } from '../shared/storable-text';
import {
  formatInstanceAddress,
  formatResourceAddress,
  ModuleInstanceStep,
  parseModulePath,
} from './instance-address';
import { JsonLimitError } from './json-limits';
import { findNonJson, isJsonObject, JsonObject, jsonPath } from './json-value';
import { InstanceObjectV4, ResourceV4, StateDocumentV4 } from './state-document';

export const STATE_INVALID = 'STATE.INVALID';

function fail(path: string, problem: string): never {
  throw new DomainError(STATE_INVALID, `${path === '' ? 'state' : path} ${problem}`, { path });
}

const isNonNegativeInteger = (v: unknown): v is number =>
  typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const isNonEmptyString = (v: unknown): v is string => typeof v === 'string' && v !== '';

/** `schema_version` lands in an integer column. */
const MAX_SCHEMA_VERSION = 2_147_483_647;

/**
 * Strings that land in text columns must be storable there; those that key
 * an index (addresses and names) must also be short enough for it. Attribute
 * values and outputs are kept exactly whatever they hold (json columns).
 */
function text(value: string, path: string): void {
  const problem = textProblem(value);
  if (problem !== null) fail(path, problem);
}

function key(value: string, path: string): void {
  const problem = keyProblem(value);
  if (problem !== null) fail(path, problem);
}

function object(value: unknown, path: string): JsonObject {
  if (!isJsonObject(value)) fail(path, 'must be an object');
  return value;
}

/**
 * Parses and validates a v4 state document (JSON text or an already-decoded
 * value). Unknown members are kept as they are; the returned document shares
 * structure with an object argument, so treat both as immutable.
 */
export function parseStateDocument(input: string | unknown): StateDocumentV4 {
  let raw: unknown = input;
  if (typeof input === 'string') {
    try {
      raw = parseJsonLossless(input);
    } catch (e) {
      if (e instanceof JsonLimitError) fail(e.path, e.problem);
      if (e instanceof DomainError) throw e;
      fail('', `is not valid JSON: ${e instanceof Error ? e.message : String(e)}`);
    }
  } else {
    const bad = findNonJson(input);
    if (bad !== null) fail(bad, 'is not plain JSON');
  }
  return validateStateDocument(raw);
}

/**
 * Validates a decoded v4 document (from JSON.parse or parseJsonLossless: plain
 * JSON by construction) and returns it typed; the checks of parseStateDocument
 * after parsing. An instance object in `accepted` passed these checks in an
 * accepted document before (the same object, treated as immutable): only the
 * checks that depend on its resource and its neighbours run again (address
 * length, repeated address). It can fail nothing else, so every refusal and
 * its wording stay the same.
 */
export function validateStateDocument(
  raw: unknown,
  accepted: ReadonlySet<object> = NOTHING,
): StateDocumentV4 {
  const doc = object(raw, '');

  if (doc.version === undefined) fail('version', 'is required');
  if (doc.version !== 4) fail('version', `must be 4 (got ${JSON.stringify(doc.version)})`);
  if (typeof doc.terraform_version !== 'string') fail('terraform_version', 'must be a string');
  text(doc.terraform_version, 'terraform_version');
  if (!isNonNegativeInteger(doc.serial)) fail('serial', 'must be a non-negative integer');
  if (typeof doc.lineage !== 'string') fail('lineage', 'must be a string');
  text(doc.lineage, 'lineage');

  const outputs = object(doc.outputs, 'outputs');
  for (const [name, output] of Object.entries(outputs)) {
    const at = jsonPath('outputs', name);
    key(name, at);
    const o = object(output, at);
    if (!('value' in o) || o.value === undefined) fail(jsonPath(at, 'value'), 'is required');
    if (o.sensitive !== undefined && typeof o.sensitive !== 'boolean') {
      fail(jsonPath(at, 'sensitive'), 'must be a boolean');
    }
  }

  if (!Array.isArray(doc.resources)) fail('resources', 'must be an array');
  const seen = new Set<string>();
  doc.resources.forEach((resource, i) =>
    validateResource(resource, `resources[${i}]`, seen, accepted),
  );

  const checks = doc.check_results;
  if (checks !== undefined && checks !== null && !Array.isArray(checks)) {
    fail('check_results', 'must be an array or null');
  }
  return doc as StateDocumentV4;
}

const NOTHING: ReadonlySet<object> = new Set();

function validateResource(
  value: unknown,
  at: string,
  seen: Set<string>,
  accepted: ReadonlySet<object>,
): void {
  const r = object(value, at);
  let module: ModuleInstanceStep[] = [];
  if (r.module !== undefined) {
    if (typeof r.module !== 'string') fail(`${at}.module`, 'must be a string');
    key(r.module, `${at}.module`);
    try {
      module = parseModulePath(r.module);
    } catch {
      fail(`${at}.module`, `must be a module path such as module.a["x"] (got ${r.module})`);
    }
  }
  if (r.mode !== 'managed' && r.mode !== 'data') fail(`${at}.mode`, 'must be "managed" or "data"');
  if (!isNonEmptyString(r.type)) fail(`${at}.type`, 'must be a non-empty string');
  if (!isNonEmptyString(r.name)) fail(`${at}.name`, 'must be a non-empty string');
  if (!isNonEmptyString(r.provider)) fail(`${at}.provider`, 'must be a non-empty string');
  key(r.type, `${at}.type`);
  key(r.name, `${at}.name`);
  text(r.provider, `${at}.provider`);
  if (r.each !== undefined && r.each !== 'list' && r.each !== 'map') {
    fail(`${at}.each`, 'must be "list" or "map"');
  }
  if (!Array.isArray(r.instances)) fail(`${at}.instances`, 'must be an array');
  const resource = r as ResourceV4;
  key(formatResourceAddress({ module, mode: resource.mode, type: r.type, name: r.name }), at);
  // The path of an accepted instance is only spelled out if it fails: a
  // string per instance of a big state is most of what checking it costs.
  const pathOf = (j: number) => `${at}.instances[${j}]`;
  r.instances.forEach((instance, j) => {
    if (!accepted.has(instance as object)) validateInstanceObject(instance, pathOf(j));
    checkAddress(instance as InstanceObjectV4, j, pathOf, resource, module, seen);
  });
}

/** The checks of an instance object that depend on nothing but the object. */
function validateInstanceObject(value: unknown, at: string): void {
  const o = object(value, at);
  const indexKey = o.index_key;
  if (indexKey !== undefined && typeof indexKey !== 'string' && !isNonNegativeInteger(indexKey)) {
    fail(`${at}.index_key`, 'must be a non-negative integer or a string');
  }
  // A string key may hold any text (for_each keys are data); the address
  // writes it HCL-quoted, so only its length is limited, through the address.
  if (o.status !== undefined && o.status !== 'tainted') fail(`${at}.status`, 'must be "tainted"');
  if (o.deposed !== undefined && !isNonEmptyString(o.deposed)) {
    fail(`${at}.deposed`, 'must be a non-empty string');
  }
  if (o.deposed !== undefined) key(o.deposed, `${at}.deposed`);
  if (typeof o.schema_version !== 'number' || !Number.isSafeInteger(o.schema_version)) {
    fail(`${at}.schema_version`, 'must be an integer');
  }
  if (o.schema_version < 0) fail(`${at}.schema_version`, 'must not be negative');
  if (o.schema_version > MAX_SCHEMA_VERSION) {
    fail(`${at}.schema_version`, `must be at most ${MAX_SCHEMA_VERSION}`);
  }
  if (o.attributes === undefined && o.attributes_flat === undefined) {
    fail(at, 'must have attributes or attributes_flat');
  }
  if (o.attributes !== undefined) object(o.attributes, `${at}.attributes`);
  if (o.attributes_flat !== undefined) {
    const flat = object(o.attributes_flat, `${at}.attributes_flat`);
    for (const [k, v] of Object.entries(flat)) {
      if (typeof v !== 'string') fail(jsonPath(`${at}.attributes_flat`, k), 'must be a string');
    }
  }
  if (o.sensitive_attributes !== undefined && !Array.isArray(o.sensitive_attributes)) {
    fail(`${at}.sensitive_attributes`, 'must be an array');
  }
  if (o.private !== undefined && typeof o.private !== 'string') {
    fail(`${at}.private`, 'must be a string');
  }
  if (o.private !== undefined) text(o.private, `${at}.private`);
  if (o.dependencies !== undefined) {
    if (!Array.isArray(o.dependencies)) fail(`${at}.dependencies`, 'must be an array');
    o.dependencies.forEach((d, k) => {
      if (typeof d !== 'string') fail(`${at}.dependencies[${k}]`, 'must be a string');
      key(d, `${at}.dependencies[${k}]`);
    });
  }
  if (o.create_before_destroy !== undefined && typeof o.create_before_destroy !== 'boolean') {
    fail(`${at}.create_before_destroy`, 'must be a boolean');
  }
}

/** The checks of an instance that depend on its resource and the instances before it. */
function checkAddress(
  instance: InstanceObjectV4,
  j: number,
  pathOf: (j: number) => string,
  r: ResourceV4,
  module: ModuleInstanceStep[],
  seen: Set<string>,
): void {
  const address = formatInstanceAddress({
    module,
    mode: r.mode,
    type: r.type,
    name: r.name,
    key: instance.index_key,
    deposed: instance.deposed,
  });
  // Each UTF-16 unit is at most 3 UTF-8 bytes: most addresses need no count.
  if (address.length * 3 > MAX_KEY_BYTES && utf8Length(address) > MAX_KEY_BYTES) {
    fail(pathOf(j), `has an address longer than ${MAX_KEY_BYTES} bytes (${address.slice(0, 60)}…)`);
  }
  if (seen.has(address)) fail(pathOf(j), `repeats the address ${address}`);
  seen.add(address);
}
