import { SchemaBlock, SchemaNestedBlock } from '../../domain/cty/schema';
import { envMemberOf, envReferences } from '../../domain/refresh/env-reference';
import { isJsonObject, jsonPath, JsonObject, JsonValue } from '../../domain/terraform';
import { RefreshError } from './refresh-error';
import type { SecretMask } from './secret-mask';

/**
 * Which variables a refresh may resolve. `kl refresh` resolves any name (the
 * operator's own environment); kld only those its operator allowed, since a
 * config is written by whoever may call the API.
 */
export interface EnvPolicy {
  /** null when `name` may be read; else why not and what to do about it. */
  refusal(name: string): string | null;
}

export interface EnvResolution {
  /** Which names may be read; any when absent (the operator's own machine). */
  policy?: EnvPolicy;
  /** Told every value handed out, so no text leaving the refresh repeats one. */
  mask?: SecretMask;
}

/**
 * Replaces every `{"env": "NAME"}` with the variable's value on this
 * machine. Secrets therefore never leave the machine that runs the refresh
 * and are never stored on the server; a variable that is not set stops the
 * run rather than configuring the provider with a hole in it. Every
 * reference is checked against the policy before any is read, so a refusal
 * never says whether a variable is set.
 */
export function resolveEnvReferences(
  config: JsonObject,
  env: Readonly<Record<string, string | undefined>>,
  label: string,
  { policy, mask }: EnvResolution = {},
): JsonObject {
  if (policy) {
    for (const ref of envReferences(config)) {
      const refusal = policy.refusal(ref.name);
      if (refusal !== null) {
        throw new RefreshError(
          'REFRESH.CONFIG_ENV_REFUSED',
          `${label}: ${ref.at || 'the config'} refers to environment variable ${ref.name}, which this server may not read: ${refusal}`,
          { variable: ref.name, at: ref.at },
        );
      }
    }
  }
  const resolve = (value: JsonValue, at: string): JsonValue => {
    if (Array.isArray(value)) return value.map((v, i) => resolve(v, jsonPath(at, i)));
    if (!isJsonObject(value)) return value;
    if (envMemberOf(value)) {
      const [ref] = envReferences(value);
      const resolved = env[ref.name];
      if (resolved === undefined) {
        throw new RefreshError(
          'REFRESH.CONFIG_ENV_MISSING',
          `${label}: ${at || 'the config'} refers to environment variable ${ref.name}, which is not set`,
          { variable: ref.name },
        );
      }
      mask?.add(resolved);
      return resolved;
    }
    const out: JsonObject = {};
    for (const [k, v] of Object.entries(value)) {
      if (v !== undefined) out[k] = resolve(v, jsonPath(at, k));
    }
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
 * `label` names the provider in a refusal; null when the caller names it
 * itself (a refresh group prefixes every failure of its own with it).
 */
export function shapeProviderConfig(
  block: SchemaBlock,
  config: JsonObject,
  label: string | null,
): JsonObject {
  return shapeBlock(block, config, label === null ? '' : `${label}: `, 'provider config');
}

/** `prefix`: what a refusal begins with (the provider's label and a colon, or nothing). */
function shapeBlock(block: SchemaBlock, value: JsonObject, prefix: string, at: string): JsonObject {
  const known = new Set([
    ...block.attributes.map((a) => a.name),
    ...block.blockTypes.map((b) => b.typeName),
  ]);
  for (const key of Object.keys(value)) {
    if (!known.has(key) && value[key] !== undefined) {
      throw new RefreshError(
        'PROVIDER_CONFIG.INVALID',
        `${prefix}${at} has no attribute "${key}" in the provider's schema`,
      );
    }
  }
  const out: JsonObject = {};
  for (const a of block.attributes) out[a.name] = value[a.name] ?? null;
  for (const nested of block.blockTypes) {
    out[nested.typeName] = shapeNested(
      nested,
      value[nested.typeName] ?? null,
      prefix,
      `${at}.${nested.typeName}`,
    );
  }
  return out;
}

function shapeNested(
  nested: SchemaNestedBlock,
  value: JsonValue,
  prefix: string,
  at: string,
): JsonValue {
  const element = (v: JsonValue, where: string): JsonObject => {
    if (!isJsonObject(v)) {
      throw new RefreshError('PROVIDER_CONFIG.INVALID', `${prefix}${where} must be an object`);
    }
    return shapeBlock(nested.block, v, prefix, where);
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
        throw new RefreshError('PROVIDER_CONFIG.INVALID', `${prefix}${at} must be an object`);
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
