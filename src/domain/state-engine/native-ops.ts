import { parseAddressGlob } from '../reservations/address-glob';
import { DomainError } from '../shared/domain-error';
import {
  formatInstanceAddress,
  instanceAddressOf,
  formatModulePath,
  formatResourceAddress,
  InstanceAddress,
  ModuleInstanceStep,
  parseInstanceAddress,
  parseModulePath,
} from '../terraform/instance-address';
import { InstanceObjectV4, StateDocumentV4 } from '../terraform/state-document';
import { resourceDescriptor, ResourceDescriptor } from '../terraform/state-instances';

/**
 * The native state operations of the state-engine lane (`kl state rm`,
 * `kl state mv`, `kl rollback resource`) as row-level changes computed
 * from slices: pure, so a dry run prints exactly what a real run commits.
 */

export interface SliceInstance {
  address: string;
  resource: ResourceDescriptor;
  instance: InstanceObjectV4;
}

export interface NativeChange {
  upserts: SliceInstance[];
  deletes: string[];
  /** One line per instance, as the operator reads it. */
  preview: string[];
  /** Resource addresses the change touches: the write reservations. */
  touched: string[];
}

export const NATIVE_REFUSED = 'REQUEST.INVALID';

const refused = (message: string) => new DomainError(NATIVE_REFUSED, message);

/** The instances of a slice document, with their addresses. */
export function sliceInstances(doc: StateDocumentV4): SliceInstance[] {
  const out: SliceInstance[] = [];
  for (const r of doc.resources) {
    const resource = resourceDescriptor(r);
    const module = parseModulePath(resource.module);
    for (const instance of r.instances) {
      out.push({
        address: instanceAddressOf(module, resource, instance),
        resource,
        instance,
      });
    }
  }
  return out.sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
}

function resourceOf(address: string): string {
  return formatResourceAddress(parseInstanceAddress(address));
}

function touchedBy(addresses: string[]): string[] {
  return [...new Set(addresses.map(resourceOf))].sort();
}

/** `kl state rm ADDR…`: every instance the addresses cover goes; naming nothing is refused. */
export function stateRm(addresses: string[], found: SliceInstance[]): NativeChange {
  if (found.length === 0) {
    throw refused(`no instance in the state matches ${addresses.join(', ')}: nothing to remove`);
  }
  const deletes = found.map((f) => f.address);
  return {
    upserts: [],
    deletes,
    preview: deletes.map((a) => `- ${a}`),
    touched: touchedBy(deletes),
  };
}

type MoveKind = 'module' | 'resource' | 'instance';

function moveKind(text: string): {
  kind: MoveKind;
  modules: ModuleInstanceStep[];
  at?: InstanceAddress;
} {
  let glob;
  try {
    glob = parseAddressGlob(text);
  } catch (err) {
    throw refused((err as Error).message);
  }
  if (text.endsWith('.*') || text === '*') {
    throw refused(`${text}: name a module, a resource or an instance, not a glob`);
  }
  if (glob.resource === null) return { kind: 'module', modules: glob.modules };
  const at = parseInstanceAddress(text);
  return { kind: at.key === undefined ? 'resource' : 'instance', modules: at.module, at };
}

/**
 * `kl state mv FROM TO`: a module (every instance under it), a resource
 * (all its instances, keys kept) or one instance, to a new address of the
 * same kind. Refused when FROM matches nothing, when a resource would
 * change type, or when anything already lives at the destination.
 */
export function stateMv(
  from: string,
  to: string,
  found: SliceInstance[],
  atDestination: SliceInstance[],
): NativeChange {
  const f = moveKind(from);
  const t = moveKind(to);
  if (f.kind !== t.kind) throw refused(`cannot move a ${f.kind} (${from}) to a ${t.kind} (${to})`);
  if (found.length === 0)
    throw refused(`no instance in the state matches ${from}: nothing to move`);
  if (atDestination.length > 0) {
    throw refused(
      `${to} already exists in the state (${atDestination
        .slice(0, 3)
        .map((d) => d.address)
        .join(', ')}): kl state mv never overwrites`,
    );
  }
  if (f.kind !== 'module' && (f.at!.type !== t.at!.type || f.at!.mode !== t.at!.mode)) {
    throw refused(`cannot move ${from} to ${to}: a resource keeps its mode and type`);
  }
  const upserts: SliceInstance[] = [];
  const preview: string[] = [];
  for (const item of found) {
    const at = parseInstanceAddress(item.address);
    let next: InstanceAddress;
    if (f.kind === 'module') {
      next = { ...at, module: [...t.modules, ...at.module.slice(f.modules.length)] };
    } else if (f.kind === 'resource') {
      next = { ...at, module: t.at!.module, name: t.at!.name };
    } else {
      next = { ...at, module: t.at!.module, name: t.at!.name, key: t.at!.key };
    }
    const address = formatInstanceAddress(next);
    const instance: InstanceObjectV4 = { ...item.instance };
    if (next.key === undefined) delete instance.index_key;
    else instance.index_key = next.key;
    upserts.push({
      address,
      resource: { ...item.resource, module: formatModulePath(next.module), name: next.name },
      instance,
    });
    preview.push(`~ ${item.address} -> ${address}`);
  }
  const deletes = found.map((x) => x.address);
  return {
    upserts,
    deletes,
    preview,
    touched: touchedBy([...deletes, ...upserts.map((u) => u.address)]),
  };
}

/**
 * `kl rollback resource ADDR --to-serial N`: the instances ADDR covered at
 * serial N come back exactly as they were; instances it covers now and did
 * not then go. Refused when ADDR did not exist at N.
 */
export function rollbackResource(
  address: string,
  serial: number,
  past: SliceInstance[],
  now: SliceInstance[],
): NativeChange {
  if (past.length === 0) {
    throw refused(`${address} did not exist at serial ${serial}: nothing to restore`);
  }
  const then = new Set(past.map((p) => p.address));
  const current = new Set(now.map((n) => n.address));
  const deletes = now.filter((n) => !then.has(n.address)).map((n) => n.address);
  return {
    upserts: past,
    deletes,
    preview: [
      ...past.map(
        (p) => `${current.has(p.address) ? '~' : '+'} ${p.address} (as at serial ${serial})`,
      ),
      ...deletes.map((d) => `- ${d}`),
    ],
    touched: touchedBy([...past.map((p) => p.address), ...deletes]),
  };
}
