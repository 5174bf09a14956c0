import { parseJsonLossless } from './lossless-json';
import { DomainError } from '../shared/domain-error';
import { keyProblem, textProblem, utf8Length, MAX_KEY_BYTES } from '../shared/storable-text';
import {
  instanceAddressOf,
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
 * after parsing.
 */
export function validateStateDocument(raw: unknown): StateDocumentV4 {
  const addresses = new AllAddresses(false);
  const document = validate(raw, null, addresses);
  // Every instance is new here (a reusing parse knows most of its objects,
  // and flattenInstances knows them by identity, with their addresses).
  checkedAddresses.set(document, {
    addresses: addresses.inOrder(),
    resources: asChecked(document),
  });
  return document;
}

/**
 * What a document shares with the accepted document before it (the reusing
 * parse): for the k-th instance object in document order, the position in the
 * previous document of the very same object, or -1 (a new object).
 */
export interface ReusedInstances {
  from: Int32Array;
  /** The previous document's addresses, if it kept them. */
  book: AddressBook | null;
}

/**
 * `validateStateDocument` for a document whose instance objects are partly
 * the previous accepted document's own (the same objects, treated as
 * immutable): those passed every check of their own before, so only the
 * checks that depend on their resource and neighbours could fail, and with
 * the previous document's `book`, not even those for an object that stays
 * under the same resource address (its address is the same string, and the
 * addresses it kept were distinct). Only the addresses of new or moved
 * objects are formatted and checked, against each other and the kept ones.
 * Any doubt (a refusal included) runs the full checks, so every refusal is
 * worded exactly as validateStateDocument words it. Returns the document's
 * own book; the previous one is taken over (and answers nothing after).
 */
export function validateReusingDocument(
  raw: unknown,
  reused: ReusedInstances,
): { document: StateDocumentV4; book: AddressBook } {
  const book = reused.book;
  if (book !== null && !book.taken) {
    try {
      const addresses = new KeptAddresses(reused.from, book);
      const document = validate(raw, reused.from, addresses);
      return { document, book: addresses.finish() };
    } catch {
      // refused, or a doubt: the full checks below decide and word it
    }
  }
  const addresses = new AllAddresses(true);
  const document = validate(raw, reused.from, addresses);
  return { document, book: addresses.book() };
}

function validate(raw: unknown, from: Int32Array | null, addresses: AddressCheck): StateDocumentV4 {
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
  const walk: Walk = { from, ordinal: 0, addresses };
  doc.resources.forEach((resource, i) => validateResource(resource, `resources[${i}]`, walk));

  const checks = doc.check_results;
  if (checks !== undefined && checks !== null && !Array.isArray(checks)) {
    fail('check_results', 'must be an array or null');
  }
  return doc as StateDocumentV4;
}

/** A resource as its instances' addresses were checked: what they depend on. */
interface CheckedResource {
  resource: ResourceV4;
  module: string | undefined;
  mode: string;
  type: string;
  name: string;
  /** Its instance objects then (a copy of the array). */
  instances: readonly InstanceObjectV4[];
  /** The position of its first instance's address. */
  first: number;
}

function asChecked(doc: StateDocumentV4): CheckedResource[] {
  let first = 0;
  return doc.resources.map((r) => {
    const { module, mode, type, name } = r;
    const checked = {
      resource: r,
      module,
      mode,
      type,
      name,
      instances: r.instances.slice(),
      first,
    };
    first += r.instances.length;
    return checked;
  });
}

/**
 * The instance addresses of each accepted document, in document order, as
 * its checks spelled them: flattenInstances takes them from here rather
 * than spelling each again (20,000 strings for a first commit of a big
 * state). Accepted documents are treated as immutable; a resource changed
 * since (its members or its instances array) gets no answer.
 */
const checkedAddresses = new WeakMap<
  StateDocumentV4,
  { addresses: readonly string[]; resources: readonly CheckedResource[] }
>();

/**
 * The addresses of the instances of `doc.resources[index]` (`resource`),
 * as they were checked when `doc` was accepted: the `j`-th instance's is
 * `addresses[first + j]`. Undefined when `doc` is not an accepted document
 * or the resource is not as it was then.
 */
export function acceptedAddresses(
  doc: StateDocumentV4,
  index: number,
  resource: ResourceV4,
): { addresses: readonly string[]; first: number } | undefined {
  const entry = checkedAddresses.get(doc);
  const checked = entry?.resources[index];
  if (entry === undefined || checked?.resource !== resource) return undefined;
  const { instances } = resource;
  if (
    checked.module !== resource.module ||
    checked.mode !== resource.mode ||
    checked.type !== resource.type ||
    checked.name !== resource.name ||
    checked.instances.length !== instances.length
  ) {
    return undefined;
  }
  for (let j = 0; j < instances.length; j++) {
    if (checked.instances[j] !== instances[j]) return undefined;
  }
  return { addresses: entry.addresses, first: checked.first };
}

/** Where the walk through a document's instances is: the next one's position in document order. */
interface Walk {
  readonly from: Int32Array | null;
  ordinal: number;
  readonly addresses: AddressCheck;
}

/** The address checks of an instance: at most MAX_KEY_BYTES, never repeated in the document. */
interface AddressCheck {
  /** The instance at `walk.ordinal`, `j`-th of its resource `r` (whose address is `resource`). */
  check(
    instance: InstanceObjectV4,
    j: number,
    pathOf: (j: number) => string,
    r: ResourceV4,
    module: ModuleInstanceStep[],
    resource: string,
    from: number,
  ): void;
}

function validateResource(value: unknown, at: string, walk: Walk): void {
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
  const address = formatResourceAddress({
    module,
    mode: resource.mode,
    type: r.type,
    name: r.name,
  });
  key(address, at);
  // The path of an accepted instance is only spelled out if it fails: a
  // string per instance of a big state is most of what checking it costs.
  const pathOf = (j: number) => `${at}.instances[${j}]`;
  const { from, addresses } = walk;
  r.instances.forEach((instance, j) => {
    const previous = from === null ? -1 : from[walk.ordinal];
    // An object of the previous accepted document passed these checks then.
    if (previous < 0) validateInstanceObject(instance, pathOf(j));
    addresses.check(instance as InstanceObjectV4, j, pathOf, resource, module, address, previous);
    walk.ordinal++;
  });
}

/**
 * The address of every instance of an accepted document, in document order
 * and by address: what lets the next document of the same state check only
 * the addresses of objects it changed or moved (validateReusingDocument).
 * Handed on from document to document, not copied: once the next document
 * took it over it is `taken`, and the document that held it would be checked
 * in full again.
 */
export class AddressBook {
  taken = false;

  constructor(
    /** In document order. */
    readonly slots: readonly AddressSlot[],
    readonly byAddress: Map<string, AddressSlot>,
  ) {}
}

interface AddressSlot {
  readonly address: string;
  /** The address of the resource it sits in. */
  readonly resource: string;
  /** Its position in the document that holds the book. */
  index: number;
}

/** Thrown where the full checks must decide (and word the refusal). */
class Doubt extends Error {}

const UNRECORDED: AddressSlot = { address: '', resource: '', index: -1 };

/** Every address formatted and checked (and, to `record`, kept for the next document). */
class AllAddresses implements AddressCheck {
  private readonly seen = new Map<string, AddressSlot>();
  private readonly slots: AddressSlot[] = [];
  private readonly ordered: string[] = [];

  constructor(private readonly record: boolean) {}

  check(
    instance: InstanceObjectV4,
    j: number,
    pathOf: (j: number) => string,
    r: ResourceV4,
    module: ModuleInstanceStep[],
    resource: string,
  ): void {
    const address = instanceAddressOf(module, r, instance);
    if (tooLong(address)) {
      fail(
        pathOf(j),
        `has an address longer than ${MAX_KEY_BYTES} bytes (${address.slice(0, 60)}…)`,
      );
    }
    if (this.seen.has(address)) fail(pathOf(j), `repeats the address ${address}`);
    if (!this.record) {
      this.seen.set(address, UNRECORDED);
      this.ordered.push(address);
      return;
    }
    const slot = { address, resource, index: this.slots.length };
    this.seen.set(address, slot);
    this.slots.push(slot);
  }

  book(): AddressBook {
    return new AddressBook(this.slots, this.seen);
  }

  /** Without a book: every address, in document order. */
  inOrder(): readonly string[] {
    return this.ordered;
  }
}

/**
 * An object kept from the previous document under the same resource address
 * has the address it had there (an instance address is its resource's
 * address, its key and its deposed key), already checked: only the others
 * are formatted, and checked against each other and against the kept ones.
 */
class KeptAddresses implements AddressCheck {
  /** Per position in the previous document: kept here under the same address. */
  private readonly kept: Uint8Array;
  private readonly slots: AddressSlot[] = [];
  private readonly fresh: AddressSlot[] = [];
  private last = -1;

  constructor(
    private readonly from: Int32Array,
    private readonly book: AddressBook,
  ) {
    this.kept = new Uint8Array(book.slots.length);
  }

  check(
    instance: InstanceObjectV4,
    _j: number,
    _pathOf: (j: number) => string,
    r: ResourceV4,
    module: ModuleInstanceStep[],
    resource: string,
    from: number,
  ): void {
    if (from >= 0) {
      // Each previous object at most once, in order: its address is then not repeated among the kept.
      if (from <= this.last || from >= this.kept.length) throw new Doubt();
      this.last = from;
      const slot = this.book.slots[from];
      if (slot.resource === resource) {
        this.kept[from] = 1;
        this.slots.push(slot);
        return;
      }
    }
    const address = instanceAddressOf(module, r, instance);
    if (tooLong(address)) throw new Doubt();
    const slot = { address, resource, index: -1 };
    this.fresh.push(slot);
    this.slots.push(slot);
  }

  /** Checks the new addresses, then hands the book on to this document. */
  finish(): AddressBook {
    const { byAddress, slots: before } = this.book;
    const seen = new Set<string>();
    for (const { address } of this.fresh) {
      if (seen.has(address)) throw new Doubt();
      seen.add(address);
      const held = byAddress.get(address);
      if (held !== undefined && this.kept[held.index] === 1) throw new Doubt();
    }
    this.book.taken = true;
    for (let p = 0; p < before.length; p++) {
      if (this.kept[p] === 0 && byAddress.get(before[p].address) === before[p]) {
        byAddress.delete(before[p].address);
      }
    }
    for (const slot of this.fresh) byAddress.set(slot.address, slot);
    for (let k = 0; k < this.slots.length; k++) this.slots[k].index = k;
    return new AddressBook(this.slots, byAddress);
  }
}

/** Longer than an indexed key may be, in UTF-8 bytes. */
function tooLong(address: string): boolean {
  // Each UTF-16 unit is at most 3 UTF-8 bytes: most addresses need no count.
  return address.length * 3 > MAX_KEY_BYTES && utf8Length(address) > MAX_KEY_BYTES;
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
