import { CtyObject, CtyValue, fromCtyJson, toCtyJson, unknown } from './cty';
import { ObjectStore } from './object-store';
import { DATA_SOURCE_SCHEMAS, impliedType, RESOURCE_SCHEMAS, SchemaSpec } from './schema';

/** Becomes an error diagnostic; anything else thrown is a provider bug. */
export class ProviderError extends Error {
  constructor(
    readonly summary: string,
    readonly detail = '',
  ) {
    super(summary);
  }
}

export interface Planned {
  planned: CtyObject | null;
  requiresReplace: string[][];
}

export function resourceSchema(typeName: string): SchemaSpec {
  const schema = RESOURCE_SCHEMAS[typeName];
  if (!schema) throw new ProviderError('Resource Not Implemented', `no resource type ${typeName}`);
  return schema;
}

export function dataSourceSchema(typeName: string): SchemaSpec {
  const schema = DATA_SOURCE_SCHEMAS[typeName];
  if (!schema) throw new ProviderError('Data Source Not Implemented', `no data source ${typeName}`);
  return schema;
}

export function planChange(
  typeName: string,
  prior: CtyObject | null,
  proposed: CtyObject | null,
): Planned {
  if (proposed === null) return { planned: null, requiresReplace: [] };
  const schema = resourceSchema(typeName);
  const planned: CtyObject = { ...proposed };
  if (prior === null) {
    for (const attribute of schema.block.attributes) {
      if (attribute.computed && planned[attribute.name] === null) {
        planned[attribute.name] = unknown;
      }
    }
    return { planned, requiresReplace: [] };
  }
  if (prior.name !== proposed.name) {
    planned.id = unknown;
    return { planned, requiresReplace: [['name']] };
  }
  return { planned, requiresReplace: [] };
}

export function applyChange(
  store: ObjectStore,
  typeName: string,
  prior: CtyObject | null,
  planned: CtyObject | null,
): CtyObject | null {
  const type = impliedType(resourceSchema(typeName).block);
  if (planned === null) {
    if (prior !== null) store.remove(typeName, String(prior.id));
    return null;
  }
  const id = prior === null || typeof planned.id !== 'string' ? store.newId(typeName) : planned.id;
  const created: CtyObject = { ...planned, id };
  store.save(typeName, id, toCtyJson(type, created));
  return created;
}

export function readObject(store: ObjectStore, typeName: string, id: CtyValue): CtyObject | null {
  const type = impliedType(resourceSchema(typeName).block);
  if (typeof id !== 'string') return null;
  const json = loadObject(store, typeName, id);
  return json === undefined ? null : (fromCtyJson(type, json) as CtyObject);
}

/**
 * A remote object, or an error naming where it was looked for: the file
 * under the configured state_dir, as a cloud SDK names the endpoint (and
 * whatever credentials its URL holds) it could not reach. Tests rely on it
 * to see that kilolock keeps such echoes of a config value to itself.
 */
function loadObject(store: ObjectStore, typeName: string, id: string): unknown {
  try {
    return store.load(typeName, id);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === undefined) throw error;
    throw new ProviderError(
      'Cannot read the remote object',
      `${store.pathOf(typeName, id)}: ${code}`,
    );
  }
}

export function importObject(store: ObjectStore, typeName: string, id: string): CtyObject {
  const found = readObject(store, typeName, id);
  if (found === null) {
    throw new ProviderError('Cannot import non-existent remote object', `no ${typeName} "${id}"`);
  }
  return found;
}

export function upgradeState(typeName: string, version: number, rawJson: string): CtyObject {
  const schema = resourceSchema(typeName);
  if (version > schema.version) {
    throw new ProviderError(
      'State written by a newer provider',
      `${typeName} state is at schema version ${version}; this provider knows ${schema.version}`,
    );
  }
  const json = JSON.parse(rawJson) as Record<string, unknown>;
  const type = impliedType(schema.block);
  if (typeName === 'kltest_item' && version === 0) {
    const { note, ...rest } = json;
    return fromCtyJson(type, { ...rest, comment: note ?? null }) as CtyObject;
  }
  return fromCtyJson(type, json) as CtyObject;
}

export function readDataSource(store: ObjectStore, typeName: string, config: CtyObject): CtyObject {
  dataSourceSchema(typeName);
  const item = readObject(store, 'kltest_item', config.id);
  if (item === null) throw new ProviderError('Item not found', `no kltest_item "${config.id}"`);
  return { id: item.id, name: item.name, comment: item.comment };
}
