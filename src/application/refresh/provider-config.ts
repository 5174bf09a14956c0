import { SchemaBlock, SchemaNestedBlock } from '../../domain/cty/schema';
import { isJsonObject, JsonObject, JsonValue } from '../../domain/terraform';
import { RefreshError } from './refresh-error';

/**
 * Replaces every `{"env": "NAME"}` with the variable's value on this
 * machine. Secrets therefore never leave the machine that runs the refresh
 * and are never stored on the server; a variable that is not set stops the
 * run rather than configuring the provider with a hole in it.
 */
export function resolveEnvReferences(
  config: JsonObject,
  env: Readonly<Record<string, string | undefined>>,
  label: string,
): JsonObject {
  const resolve = (value: JsonValue, at: string): JsonValue => {
    if (Array.isArray(value)) return value.map((v, i) => resolve(v, `${at}[${i}]`));
    if (!isJsonObject(value)) return value;
    const keys = Object.keys(value).filter((k) => value[k] !== undefined);
    if (keys.length === 1 && keys[0] === 'env' && typeof value.env === 'string') {
      const resolved = env[value.env];
      if (resolved === undefined) {
        throw new RefreshError(
          'REFRESH.CONFIG_ENV_MISSING',
          `${label}: ${at} refers to environment variable ${value.env}, which is not set`,
          { variable: value.env },
        );
      }
      return resolved;
    }
    const out: JsonObject = {};
    for (const k of keys) out[k] = resolve(value[k] as JsonValue, at ? `${at}.${k}` : k);
    return out;
  };
  return resolve(config, '') as JsonObject;
}

/**
 * The config object Configure needs: every attribute of the provider block
 * present (null when unset) and every nested block in the shape the cty codec
 * expects (list/set blocks as lists of objects — a lone object is accepted
 * for convenience — single blocks as one object or null). An unknown member
 * is refused here, naming it, instead of by the provider's terse count check.
 */
export function shapeProviderConfig(
  block: SchemaBlock,
  config: JsonObject,
  label: string,
): JsonObject {
  return shapeBlock(block, config, label, 'provider config');
}

function shapeBlock(block: SchemaBlock, value: JsonObject, label: string, at: string): JsonObject {
  const known = new Set([
    ...block.attributes.map((a) => a.name),
    ...block.blockTypes.map((b) => b.typeName),
  ]);
  for (const key of Object.keys(value)) {
    if (!known.has(key) && value[key] !== undefined) {
      throw new RefreshError(
        'REFRESH.CONFIG_INVALID',
        `${label}: ${at} has no attribute "${key}" in the provider's schema`,
      );
    }
  }
  const out: JsonObject = {};
  for (const a of block.attributes) out[a.name] = value[a.name] ?? null;
  for (const nested of block.blockTypes) {
    out[nested.typeName] = shapeNested(
      nested,
      value[nested.typeName] ?? null,
      label,
      `${at}.${nested.typeName}`,
    );
  }
  return out;
}

function shapeNested(
  nested: SchemaNestedBlock,
  value: JsonValue,
  label: string,
  at: string,
): JsonValue {
  const element = (v: JsonValue, where: string): JsonObject => {
    if (!isJsonObject(v)) {
      throw new RefreshError('REFRESH.CONFIG_INVALID', `${label}: ${where} must be an object`);
    }
    return shapeBlock(nested.block, v, label, where);
  };
  switch (nested.nesting) {
    case 'single':
      return value === null ? null : element(value, at);
    case 'group':
      return element(value ?? {}, at);
    case 'list':
    case 'set': {
      if (value === null) return [];
      const items = Array.isArray(value) ? value : [value];
      return items.map((v, i) => element(v, `${at}[${i}]`));
    }
    case 'map': {
      if (value === null) return {};
      if (!isJsonObject(value)) {
        throw new RefreshError('REFRESH.CONFIG_INVALID', `${label}: ${at} must be an object`);
      }
      const out: JsonObject = {};
      for (const [k, v] of Object.entries(value)) {
        if (v !== undefined) out[k] = element(v, `${at}["${k}"]`);
      }
      return out;
    }
    default: {
      const never: never = nested.nesting;
      throw new Error(`unknown nesting ${String(never)}`);
    }
  }
}
