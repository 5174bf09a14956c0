import type { LifecycleOpened } from '../../domain/state';
import {
  formatIndexKey,
  formatResourceAddress,
  JsonObject,
  JsonValue,
  parseModulePath,
} from '../../domain/terraform';

/** Instance members that have a column of their own; every other member lands in `extra`. */
const INSTANCE_COLUMNS: readonly string[] = [
  'index_key',
  'status',
  'deposed',
  'schema_version',
  'attributes',
  'sensitive_attributes',
  'private',
  'dependencies',
  'create_before_destroy',
];

/** A `resources` row as JSON for jsonb_to_recordset; absent members become NULL. */
export type ResourceRow = Record<string, JsonValue>;

/**
 * Resource addresses are what `dependencies` name, so a dependency edge can
 * be joined to the instances it points at. Module paths repeat across a
 * state's instances, hence the memo.
 */
export class ResourceAddresses {
  private readonly modules = new Map<string, ReturnType<typeof parseModulePath>>();

  of(resource: LifecycleOpened['data']['resource']): string {
    let module = this.modules.get(resource.module);
    if (module === undefined) {
      module = parseModulePath(resource.module);
      this.modules.set(resource.module, module);
    }
    return formatResourceAddress({ ...resource, module });
  }
}

export function resourceRow(data: LifecycleOpened['data'], resourceAddress: string): ResourceRow {
  const { resource, instance } = data;
  const extra: JsonObject = {};
  let hasExtra = false;
  for (const [key, value] of Object.entries(instance)) {
    if (INSTANCE_COLUMNS.includes(key) || value === undefined) continue;
    extra[key] = value;
    hasExtra = true;
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
  const optional: [string, JsonValue | undefined][] = [
    // The key as written between the brackets of the address: 0, "web".
    ['index_key', instance.index_key === undefined ? undefined : bare(instance.index_key)],
    ['deposed_key', instance.deposed],
    ['each_mode', resource.each ?? undefined],
    ['attributes', instance.attributes],
    ['sensitive_attributes', instance.sensitive_attributes],
    ['private', instance.private],
    ['dependencies', instance.dependencies],
    ['status', instance.status],
    ['extra', hasExtra ? extra : undefined],
    ['resource_extra', resource.extra],
  ];
  for (const [column, value] of optional) if (value !== undefined) row[column] = value;
  return row;
}

function bare(key: number | string): string {
  return formatIndexKey(key).slice(1, -1);
}
