import { sha256Hex } from './canonical-hash';
import { canonicalJson } from './canonical-json';
import { instanceAddressOf, parseModulePath, ResourceMode } from './instance-address';
import { JsonObject, sameJson } from './json-value';
import { rememberingLast } from '../shared/remembering-last';
import { acceptedAddresses } from './parse-state-document';
import { InstanceObjectV4, RESOURCE_FIELDS, ResourceV4, StateDocumentV4 } from './state-document';

/** The resource-level fields an instance inherits; part of its identity and hash. */
export interface ResourceDescriptor {
  /** Module instance path as terraform writes it; '' for the root module. */
  module: string;
  mode: ResourceMode;
  type: string;
  name: string;
  provider: string;
  each: 'list' | 'map' | null;
  /** Unknown resource-level members, kept so the document rebuilds exactly. */
  extra?: JsonObject;
}

export interface FlatInstance {
  address: string;
  resource: ResourceDescriptor;
  instance: InstanceObjectV4;
  hash: string;
}

/**
 * The hash covers the resource fields too: the same attributes under another
 * provider (or module, or name) are a different object in terraform's eyes,
 * so they must open a new lifecycle.
 */
export function instanceHash(resource: ResourceDescriptor, instance: InstanceObjectV4): string {
  // canonicalHash({ resource, instance }), spelled without building the pair
  // ("instance" sorts first): the same text, and the same hash as ever.
  return sha256Hex(`{"instance":${canonicalJson(instance)},"resource":${resourceText(resource)}}`);
}

/**
 * The canonical text of a descriptor, remembered for the one spelled last.
 * The instances of a resource share their descriptor and are hashed one
 * after another (flattenInstances), and spelling it (its keys are not in
 * sorted order: a sorted copy, then its text) was a sixth of hashing a
 * first commit's 20,000 instances.
 */
const resourceText = rememberingLast((resource: ResourceDescriptor) =>
  canonicalJson(resource as unknown as JsonObject),
);

export function resourceDescriptor(r: ResourceV4): ResourceDescriptor {
  const descriptor: ResourceDescriptor = {
    module: r.module ?? '',
    mode: r.mode,
    type: r.type,
    name: r.name,
    provider: r.provider,
    each: r.each ?? null,
  };
  const known: readonly string[] = RESOURCE_FIELDS;
  const extra: JsonObject = {};
  let hasExtra = false;
  for (const [key, value] of Object.entries(r)) {
    if (known.includes(key) || value === undefined) continue;
    extra[key] = value;
    hasExtra = true;
  }
  if (hasExtra) descriptor.extra = extra;
  return descriptor;
}

/**
 * Computes `instanceHash(resource, instance)`; a caller that sees the same
 * instances commit after commit may answer from a memo instead.
 */
export type InstanceHasher = (
  address: string,
  resource: ResourceDescriptor,
  instance: InstanceObjectV4,
) => string;

const hashInstance: InstanceHasher = (_address, resource, instance) =>
  instanceHash(resource, instance);

/**
 * A flat instance already made of this very instance object (the same
 * object, not an equal one: parsed documents are never changed), e.g. by the
 * last commit of a document whose unchanged instances were shared with it.
 */
export type KnownFlatInstance = (instance: InstanceObjectV4) => FlatInstance | undefined;

/** Do two descriptors describe the same resource, member for member? */
export function sameDescriptor(a: ResourceDescriptor, b: ResourceDescriptor): boolean {
  return (
    a === b ||
    (a.module === b.module &&
      a.mode === b.mode &&
      a.type === b.type &&
      a.name === b.name &&
      a.provider === b.provider &&
      a.each === b.each &&
      sameJson(a.extra, b.extra))
  );
}

/**
 * Every instance object of a (validated) document, deposed ones included, in
 * document order. An instance `known` answers for, under an equal resource,
 * is that answer: its address and hash are functions of the resource and the
 * object alone, so nothing is formatted or hashed again for it. `made` is
 * told of each flat instance made anew (not of those `known` answered), so a
 * caller that keeps them keeps these very objects rather than copies.
 */
export function flattenInstances(
  doc: StateDocumentV4,
  hash: InstanceHasher = hashInstance,
  known?: KnownFlatInstance,
  made?: (flat: FlatInstance) => void,
): FlatInstance[] {
  const out: FlatInstance[] = [];
  doc.resources.forEach((r, index) => {
    // Spelled already when the document was accepted.
    const checked = acceptedAddresses(doc, index, r);
    let resource = resourceDescriptor(r);
    let module: ReturnType<typeof parseModulePath> | undefined;
    // A descriptor of an earlier flattening found equal to this one.
    let equal: ResourceDescriptor | undefined;
    r.instances.forEach((instance, j) => {
      const flat = known?.(instance);
      if (flat !== undefined) {
        if (flat.resource === equal) {
          out.push(flat);
          return;
        }
        if (equal === undefined && sameDescriptor(flat.resource, resource)) {
          resource = equal = flat.resource;
          out.push(flat);
          return;
        }
      }
      let address = checked?.addresses[checked.first + j];
      if (address === undefined) {
        module ??= parseModulePath(resource.module);
        address = instanceAddressOf(module, r, instance);
      }
      const fresh: FlatInstance = {
        address,
        resource,
        instance,
        hash: hash(address, resource, instance),
      };
      made?.(fresh);
      out.push(fresh);
    });
  });
  return out;
}
