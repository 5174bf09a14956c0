import { compareGoStrings } from './go-string-order';
import { IndexKey } from './instance-address';
import { JsonObject, JsonValue } from './json-value';
import {
  DOCUMENT_FIELDS,
  InstanceObjectV4,
  OutputV4,
  ResourceV4,
  StateDocumentV4,
} from './state-document';
import { FlatInstance, ResourceDescriptor } from './state-instances';
import { canonicalJson } from './canonical-json';

/** Everything of a document that is not its instances. */
export interface StateDocumentMeta {
  terraformVersion: string;
  serial: number;
  lineage: string;
  outputs: Record<string, OutputV4>;
  /** null both when terraform wrote null and when it wrote nothing (before 1.3). */
  checkResults: JsonValue;
  /** Unknown top-level members. */
  extra: JsonObject;
}

export function documentMeta(doc: StateDocumentV4): StateDocumentMeta {
  const known: readonly string[] = DOCUMENT_FIELDS;
  const extra: JsonObject = {};
  for (const [key, value] of Object.entries(doc)) {
    if (!known.includes(key) && value !== undefined) extra[key] = value;
  }
  return {
    terraformVersion: doc.terraform_version,
    serial: doc.serial,
    lineage: doc.lineage,
    outputs: doc.outputs,
    checkResults: doc.check_results ?? null,
    extra,
  };
}

type Placed = Pick<FlatInstance, 'resource' | 'instance'>;

/**
 * Rebuilds a v4 document from its metadata and instances, in the order
 * terraform's own writer uses (statefile.normalize): resources by module
 * path, mode, type, name as Go strings; instances by key (none, then
 * integers, then strings), then deposed key. Both sorts are stable.
 */
export function buildDocument(
  meta: StateDocumentMeta,
  instances: Iterable<Placed>,
): StateDocumentV4 {
  const groups = new ResourceGroups();
  for (const { resource, instance } of instances) {
    const group = groups.of(resource);
    if (group === undefined) {
      groups.open(resource, instance);
      continue;
    }
    // Same descriptor object (the common case when a projector keeps one per
    // resource) needs no comparison; only distinct objects are checked.
    if (group.resource !== resource && !sameDescriptor(group.resource, resource)) {
      const key = JSON.stringify([resource.module, resource.mode, resource.type, resource.name]);
      throw new Error(`instances of ${key} disagree on their resource fields`);
    }
    group.instances.push(instance);
  }

  const resources = groups
    .all()
    .sort((a, b) => compareResources(a.resource, b.resource))
    .map(({ resource, instances: objects }) => toResource(resource, objects.sort(compareObjects)));

  const doc: StateDocumentV4 = {
    version: 4,
    terraform_version: meta.terraformVersion,
    serial: meta.serial,
    lineage: meta.lineage,
    outputs: meta.outputs,
    resources,
    check_results: meta.checkResults,
  };
  return withExtra(doc, meta.extra);
}

interface Group {
  resource: ResourceDescriptor;
  instances: InstanceObjectV4[];
}

/**
 * Instances grouped by resource address (module, mode, type, name), in
 * first-seen order: nested maps of the parts, so a lookup builds no key.
 */
class ResourceGroups {
  private readonly byModule = new Map<string, Map<string, Map<string, Map<string, Group>>>>();
  private readonly order: Group[] = [];

  /** The resource's group, if one was opened. */
  of(resource: ResourceDescriptor): Group | undefined {
    const byMode = child(this.byModule, resource.module);
    const byType = child(byMode, resource.mode);
    const byName = child(byType, resource.type);
    return byName.get(resource.name);
  }

  open(resource: ResourceDescriptor, instance: InstanceObjectV4): void {
    const group = { resource, instances: [instance] };
    const byName = child(
      child(child(this.byModule, resource.module), resource.mode),
      resource.type,
    );
    byName.set(resource.name, group);
    this.order.push(group);
  }

  all(): Group[] {
    return [...this.order];
  }
}

function child<V>(map: Map<string, Map<string, V>>, key: string): Map<string, V> {
  let found = map.get(key);
  if (found === undefined) map.set(key, (found = new Map()));
  return found;
}

function sameDescriptor(a: ResourceDescriptor, b: ResourceDescriptor): boolean {
  return (
    a.provider === b.provider &&
    a.each === b.each &&
    (a.extra === b.extra || canonicalJson({ ...a.extra }) === canonicalJson({ ...b.extra }))
  );
}

/** Appends unknown members after the known ones; a known member always wins. */
function withExtra<T extends JsonObject>(target: T, extra: JsonObject | undefined): T {
  for (const [key, value] of Object.entries(extra ?? {})) {
    if (!(key in target)) Object.assign(target, { [key]: value });
  }
  return target;
}

function toResource(r: ResourceDescriptor, instances: InstanceObjectV4[]): ResourceV4 {
  // Member order follows terraform's resourceStateV4 struct.
  const out: ResourceV4 = {
    ...(r.module === '' ? {} : { module: r.module }),
    mode: r.mode,
    type: r.type,
    name: r.name,
    ...(r.each === null ? {} : { each: r.each }),
    provider: r.provider,
    instances,
  };
  return withExtra(out, r.extra);
}

function compareResources(a: ResourceDescriptor, b: ResourceDescriptor): number {
  return (
    compareGoStrings(a.module, b.module) ||
    compareGoStrings(a.mode, b.mode) ||
    compareGoStrings(a.type, b.type) ||
    compareGoStrings(a.name, b.name)
  );
}

function keyRank(k: IndexKey | undefined): number {
  return k === undefined ? 0 : typeof k === 'number' ? 1 : 2;
}

function compareObjects(a: InstanceObjectV4, b: InstanceObjectV4): number {
  const ka = a.index_key;
  const kb = b.index_key;
  const byKey =
    keyRank(ka) - keyRank(kb) ||
    (typeof ka === 'number' && typeof kb === 'number' ? ka - kb : 0) ||
    (typeof ka === 'string' && typeof kb === 'string' ? compareGoStrings(ka, kb) : 0);
  return byKey || compareGoStrings(a.deposed ?? '', b.deposed ?? '');
}
