import { DomainError } from '../shared/domain-error';
import { keyProblem } from '../shared/storable-text';
import {
  formatIndexKey,
  formatModulePath,
  IndexKey,
  InstanceAddress,
  ModuleInstanceStep,
  moduleSteps,
  parseInstanceAddress,
  ResourceMode,
} from '../terraform/instance-address';

/**
 * What a reservation covers, as a set of resource instance addresses.
 *
 *   `*`                         every address
 *   `module.a` / `module.a.*`   everything in every instance of module call a
 *   `module.a[0]` / `module.a["k"].*`   everything in that module instance
 *   `aws_vpc.main`              every instance of that resource (`main`, `main[0]`, `main["k"]`)
 *   `aws_vpc.main[0]`           that one instance
 *   `module.a[0].data.aws_ami.x["k"]`   likewise inside modules, for data sources too
 *
 * A step without a key stands for all its instances (and for the unkeyed
 * one), so `module.a` covers `module.a[0].x.y`; a deposed object belongs to
 * its instance. Keys compare by type and value: `x[1]` is neither `x[10]`
 * nor `x["1"]`. Globs are parsed into steps, never compared as strings, so
 * `module.a.*` does not cover `module.ab.x` and a quoted key may hold dots,
 * brackets and stars.
 */
export interface AddressGlob {
  /** Leading module steps; a step without key matches any key or none. */
  modules: ModuleInstanceStep[];
  /** null: everything below the modules (an open glob). */
  resource: ResourceStep | null;
}

export interface ResourceStep {
  mode: ResourceMode;
  type: string;
  name: string;
  /** undefined: every instance of the resource. */
  key?: IndexKey;
}

export const GLOB_INVALID = 'RESERVATION.GLOB_INVALID';

const ALL: AddressGlob = { modules: [], resource: null };

function invalid(text: string, why: string): DomainError {
  return new DomainError(GLOB_INVALID, `${JSON.stringify(text)} is not an address glob: ${why}`, {
    glob: text,
  });
}

/** Parses a glob (see AddressGlob); throws RESERVATION.GLOB_INVALID. */
export function parseAddressGlob(text: string): AddressGlob {
  const problem = keyProblem(text);
  if (problem !== null) throw invalid(text.slice(0, 80), problem);
  if (text === '*') return ALL;
  if (text.endsWith('.*')) {
    const modules = modulesOf(text.slice(0, -2));
    if (modules === null) throw invalid(text, 'only module paths may end in .* (module.web.*)');
    return { modules, resource: null };
  }
  const modules = modulesOf(text);
  if (modules !== null) return { modules, resource: null };
  let address: InstanceAddress;
  try {
    address = parseInstanceAddress(text);
  } catch {
    throw invalid(
      text,
      'expected *, module.NAME[KEY].*, or a resource address such as aws_vpc.main[0]',
    );
  }
  if (address.deposed !== undefined) throw invalid(text, 'a deposed object is not reservable');
  const resource: ResourceStep = { mode: address.mode, type: address.type, name: address.name };
  if (address.key !== undefined) resource.key = address.key;
  return { modules: address.module, resource };
}

function modulesOf(text: string): ModuleInstanceStep[] | null {
  return text.startsWith('module.') ? moduleSteps(text) : null;
}

/** The one spelling of a glob: `*`, `module.a.*`, `module.a[0].aws_vpc.main["k"]`. */
export function formatAddressGlob(glob: AddressGlob): string {
  const prefix = formatModulePath(glob.modules);
  if (glob.resource === null) return prefix === '' ? '*' : `${prefix}.*`;
  const r = glob.resource;
  const local = `${r.mode === 'data' ? 'data.' : ''}${r.type}.${r.name}${
    r.key === undefined ? '' : formatIndexKey(r.key)
  }`;
  return prefix === '' ? local : `${prefix}.${local}`;
}

/** `text` in its one spelling; throws RESERVATION.GLOB_INVALID. */
export function normalizeAddressGlob(text: string): string {
  return formatAddressGlob(parseAddressGlob(text));
}

function sameKey(a: IndexKey | undefined, b: IndexKey | undefined): boolean {
  return a === b; // number and string keys never compare equal
}

/** Could one address carry both keys? A missing key in a glob stands for any. */
function keysMeet(a: IndexKey | undefined, b: IndexKey | undefined): boolean {
  return a === undefined || b === undefined || sameKey(a, b);
}

function stepsMeet(a: ModuleInstanceStep, b: ModuleInstanceStep): boolean {
  return a.name === b.name && keysMeet(a.key, b.key);
}

function resourcesMeet(a: ResourceStep, b: ResourceStep): boolean {
  return a.mode === b.mode && a.type === b.type && a.name === b.name && keysMeet(a.key, b.key);
}

/**
 * Is there an address both globs cover? Exact: true only when such an
 * address exists (it can be spelled by taking, step by step, whichever
 * glob names a key).
 */
export function globsIntersect(a: AddressGlob, b: AddressGlob): boolean {
  const shared = Math.min(a.modules.length, b.modules.length);
  for (let i = 0; i < shared; i++) if (!stepsMeet(a.modules[i], b.modules[i])) return false;
  if (a.resource !== null && b.resource !== null) {
    return a.modules.length === b.modules.length && resourcesMeet(a.resource, b.resource);
  }
  // An open glob covers everything below its modules; a resource glob sits
  // at exactly its depth, which must be at or below the open one's.
  if (a.resource !== null) return a.modules.length >= b.modules.length;
  if (b.resource !== null) return b.modules.length >= a.modules.length;
  return true;
}

/** Does the glob cover this instance address (a deposed object counts as its instance)? */
export function globCovers(glob: AddressGlob, address: InstanceAddress): boolean {
  if (address.module.length < glob.modules.length) return false;
  for (let i = 0; i < glob.modules.length; i++) {
    const g = glob.modules[i];
    const m = address.module[i];
    if (g.name !== m.name || (g.key !== undefined && !sameKey(g.key, m.key))) return false;
  }
  const r = glob.resource;
  if (r === null) return true;
  return (
    address.module.length === glob.modules.length &&
    r.mode === address.mode &&
    r.type === address.type &&
    r.name === address.name &&
    (r.key === undefined || sameKey(r.key, address.key))
  );
}

/** Reservation modes: any number of readers, or one writer, per address. */
export type ReservationMode = 'read' | 'write';

/** The conflict matrix: the globs intersect and at least one side writes. */
export function reservationsConflict(
  a: { glob: AddressGlob; mode: ReservationMode },
  b: { glob: AddressGlob; mode: ReservationMode },
): boolean {
  return (a.mode === 'write' || b.mode === 'write') && globsIntersect(a.glob, b.glob);
}

export const ALL_ADDRESSES: AddressGlob = ALL;
