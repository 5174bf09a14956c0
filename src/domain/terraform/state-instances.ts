import { canonicalHash } from './canonical-hash';
import { formatInstanceAddress, parseModulePath, ResourceMode } from './instance-address';
import { JsonObject } from './json-value';
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
  return canonicalHash({ resource: { ...resource }, instance });
}

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

/** Every instance object of a (validated) document, deposed ones included, in document order. */
export function flattenInstances(
  doc: StateDocumentV4,
  hash: InstanceHasher = hashInstance,
): FlatInstance[] {
  const out: FlatInstance[] = [];
  for (const r of doc.resources) {
    const resource = resourceDescriptor(r);
    const module = parseModulePath(resource.module);
    for (const instance of r.instances) {
      const address = formatInstanceAddress({
        module,
        mode: r.mode,
        type: r.type,
        name: r.name,
        key: instance.index_key,
        deposed: instance.deposed,
      });
      out.push({ address, resource, instance, hash: hash(address, resource, instance) });
    }
  }
  return out;
}
