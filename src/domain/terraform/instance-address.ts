import { DomainError } from '../shared/domain-error';
import { quoteHclString, readHclQuotedString } from './hcl-quoted-string';

export type ResourceMode = 'managed' | 'data';
/** count → non-negative integer, for_each → string. */
export type IndexKey = number | string;

export interface ModuleInstanceStep {
  name: string;
  key?: IndexKey;
}

export interface InstanceAddress {
  /** Root module = []. */
  module: ModuleInstanceStep[];
  mode: ResourceMode;
  type: string;
  name: string;
  key?: IndexKey;
  /** Set for a deposed object (a replaced object not yet destroyed). */
  deposed?: string;
}

export const ADDRESS_INVALID = 'ADDRESS.INVALID';

// The wording terraform's UI uses for deposed objects, so logs and our
// addresses read the same.
const DEPOSED_SUFFIX = /^(.*) \(deposed object ([^()]+)\)$/s;
// HCL identifiers (hclsyntax.ValidIdentifier). Sticky: matched where the
// cursor is, without a copy of the rest of the text per step.
const IDENTIFIER = /[\p{ID_Start}_][\p{ID_Continue}-]*/uy;
const COUNT_KEY = /(0|[1-9][0-9]*)\]/y;

export function formatIndexKey(key: IndexKey): string {
  return typeof key === 'number' ? `[${key}]` : `[${quoteHclString(key)}]`;
}

/** `module.a["x"].module.b[0]`; the root module is the empty string. */
export function formatModulePath(steps: readonly ModuleInstanceStep[]): string {
  return steps
    .map((s) => `module.${s.name}${s.key === undefined ? '' : formatIndexKey(s.key)}`)
    .join('.');
}

/**
 * `module.a["x"].data.aws_ami.x` — the resource, without instance key; one
 * flat string, as formatInstanceAddress's (the lifecycles' rows keep one per
 * instance opened while their `COPY` is written).
 */
export function formatResourceAddress(
  a: Pick<InstanceAddress, 'module' | 'mode' | 'type' | 'name'>,
): string {
  const data = a.mode === 'data' ? 'data.' : '';
  return a.module.length === 0
    ? [data, a.type, '.', a.name].join('')
    : [formatModulePath(a.module), '.', data, a.type, '.', a.name].join('');
}

/**
 * The instance address exactly as terraform prints it, as one flat string.
 * Joined rather than concatenated: V8 keeps a concatenation as a rope, about
 * five string objects for `module.m.terraform_data.x[12]`, and a commit holds
 * every address of its document (the flat instances, the events) until its
 * append is written, every young collection meanwhile copying the ropes.
 */
export function formatInstanceAddress(a: InstanceAddress): string {
  const key = a.key === undefined ? '' : formatIndexKey(a.key);
  const deposed = a.deposed === undefined ? '' : ` (deposed object ${a.deposed})`;
  return [formatResourceAddress(a), key, deposed].join('');
}

/**
 * The address of a state document's instance object: its resource's mode,
 * type and name in `module`, its `index_key` and `deposed` key.
 */
export function instanceAddressOf(
  module: ModuleInstanceStep[],
  resource: { mode: ResourceMode; type: string; name: string },
  instance: { index_key?: IndexKey; deposed?: string },
): string {
  return formatInstanceAddress({
    module,
    mode: resource.mode,
    type: resource.type,
    name: resource.name,
    key: instance.index_key,
    deposed: instance.deposed,
  });
}

class Cursor {
  pos = 0;
  constructor(readonly text: string) {}

  done(): boolean {
    return this.pos >= this.text.length;
  }

  take(literal: string): boolean {
    if (!this.text.startsWith(literal, this.pos)) return false;
    this.pos += literal.length;
    return true;
  }

  identifier(): string | null {
    IDENTIFIER.lastIndex = this.pos;
    const m = IDENTIFIER.exec(this.text);
    if (!m) return null;
    this.pos += m[0].length;
    return m[0];
  }

  /** `[0]` or `["k"]`; undefined when there is no `[` here, null when malformed. */
  indexKey(): IndexKey | undefined | null {
    if (!this.take('[')) return undefined;
    let key: IndexKey;
    COUNT_KEY.lastIndex = this.pos;
    const digits = COUNT_KEY.exec(this.text);
    if (digits) {
      key = Number(digits[1]);
      if (!Number.isSafeInteger(key)) return null;
      this.pos += digits[1].length;
    } else {
      const quoted = readHclQuotedString(this.text, this.pos);
      if (!quoted) return null;
      key = quoted.value;
      this.pos = quoted.end;
    }
    return this.take(']') ? key : null;
  }
}

function invalid(text: string, what: string): DomainError {
  return new DomainError(ADDRESS_INVALID, `${JSON.stringify(text)} is not a valid ${what}`);
}

/** Parses a module instance path as terraform writes it in state (`module` field). */
export function parseModulePath(path: string): ModuleInstanceStep[] {
  const steps = moduleSteps(path);
  if (steps === null) throw invalid(path, 'module path');
  return steps;
}

/**
 * `parseModulePath`, null where that throws: for callers asking whether a
 * text is a module path at all (every resource address of a glob list),
 * which an exception with its stack trace made cost more than the parse.
 */
export function moduleSteps(path: string): ModuleInstanceStep[] | null {
  if (path === '') return [];
  const cur = new Cursor(path);
  const steps: ModuleInstanceStep[] = [];
  do {
    const name = cur.take('module.') ? cur.identifier() : null;
    const key = name === null ? null : cur.indexKey();
    if (name === null || key === null) return null;
    steps.push(key === undefined ? { name } : { name, key });
  } while (cur.take('.'));
  return cur.done() ? steps : null;
}

/** Parses an address produced by formatInstanceAddress (or printed by terraform). */
export function parseInstanceAddress(address: string): InstanceAddress {
  const what = 'instance address';
  let body = address;
  let deposed: string | undefined;
  // Most addresses are not deposed objects: the suffix's pattern scans the whole text.
  const dep = address.endsWith(')') ? DEPOSED_SUFFIX.exec(address) : null;
  if (dep) {
    body = dep[1];
    deposed = dep[2];
  }
  const cur = new Cursor(body);
  const module: ModuleInstanceStep[] = [];
  // A resource type may itself be called "module"; only treat a `module.`
  // segment as a module step when a resource still follows it.
  for (;;) {
    const save = cur.pos;
    if (!cur.take('module.')) break;
    const name = cur.identifier();
    const key = name === null ? null : cur.indexKey();
    if (name === null || key === null || !cur.take('.')) {
      cur.pos = save;
      break;
    }
    module.push(key === undefined ? { name } : { name, key });
  }
  const mode: ResourceMode = cur.take('data.') ? 'data' : 'managed';
  const type = cur.identifier();
  if (type === null || !cur.take('.')) throw invalid(address, what);
  const name = cur.identifier();
  if (name === null) throw invalid(address, what);
  const key = cur.indexKey();
  if (key === null || !cur.done()) throw invalid(address, what);
  const parsed: InstanceAddress = { module, mode, type, name };
  if (key !== undefined) parsed.key = key;
  if (deposed !== undefined) parsed.deposed = deposed;
  return parsed;
}
