import type { LifecycleOpened } from '../../domain/state';
import {
  formatIndexKey,
  formatResourceAddress,
  JsonObject,
  JsonValue,
  parseModulePath,
  ResourceDescriptor,
} from '../../domain/terraform';
import { rememberingLast } from '../../domain/shared/remembering-last';

/** Instance members that have a column of their own; every other member lands in `extra`. */
const INSTANCE_COLUMNS: ReadonlySet<string> = new Set([
  'index_key',
  'status',
  'deposed',
  'schema_version',
  'attributes',
  'sensitive_attributes',
  'private',
  'dependencies',
  'create_before_destroy',
]);

/** A `resources` row as JSON for jsonb_to_recordset; absent members become NULL. */
export type ResourceRow = Record<string, JsonValue>;

/**
 * Resource addresses are what `dependencies` name, so a dependency edge can
 * be joined to the instances it points at. Module paths repeat across a
 * state's instances, hence the memo.
 */
export class ResourceAddresses {
  private readonly modules = new Map<string, ReturnType<typeof parseModulePath>>();

  /**
   * A descriptor's resource address, remembered for the one asked last: a
   * first commit's 20,000 opens format a handful of addresses rather than
   * one each (and hold those few strings, not 20,000).
   */
  readonly of: (resource: ResourceDescriptor) => string = rememberingLast(
    (resource: ResourceDescriptor) => {
      let module = this.modules.get(resource.module);
      if (module === undefined) {
        module = parseModulePath(resource.module);
        this.modules.set(resource.module, module);
      }
      return formatResourceAddress({
        module,
        mode: resource.mode,
        type: resource.type,
        name: resource.name,
      });
    },
  );
}

/**
 * A lifecycle's `resources` row. Built for each of a first commit's 20,000
 * opens while their `COPY` is written: members are set one by one (no array
 * of entries or of optional pairs per instance), in the same order as ever.
 */
export function resourceRow(data: LifecycleOpened['data'], resourceAddress: string): ResourceRow {
  const { resource, instance } = data;
  let extra: JsonObject | undefined;
  for (const key of Object.keys(instance)) {
    if (INSTANCE_COLUMNS.has(key)) continue;
    const value = (instance as JsonObject)[key];
    if (value === undefined) continue;
    extra ??= {};
    extra[key] = value;
  }
  const row: ResourceRow = {
    state_id: data.stateId,
    address: data.address,
    resource_address: resourceAddress,
    mode: resource.mode,
    type: resource.type,
    name: resource.name,
    module_path: resource.module,
    provider: resource.provider,
    schema_version: instance.schema_version,
    create_before_destroy: instance.create_before_destroy ?? false,
    instance,
    attributes_hash: data.hash,
    create_version: data.version,
    create_serial: data.serial,
  };
  // The key as written between the brackets of the address: 0, "web".
  if (instance.index_key !== undefined) row.index_key = bare(instance.index_key);
  if (instance.deposed !== undefined) row.deposed_key = instance.deposed;
  if (resource.each !== undefined && resource.each !== null) row.each_mode = resource.each;
  if (instance.attributes !== undefined) row.attributes = instance.attributes;
  if (instance.sensitive_attributes !== undefined) {
    row.sensitive_attributes = instance.sensitive_attributes;
  }
  if (instance.private !== undefined) row.private = instance.private;
  if (instance.dependencies !== undefined) row.dependencies = instance.dependencies;
  if (instance.status !== undefined) row.status = instance.status;
  if (extra !== undefined) row.extra = extra;
  if (resource.extra !== undefined) row.resource_extra = resource.extra;
  return row;
}

function bare(key: number | string): string {
  return formatIndexKey(key).slice(1, -1);
}
