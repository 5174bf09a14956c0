import { DomainError } from '../shared/domain-error';
import { isJsonObject, jsonPath, JsonValue } from '../terraform/json-value';
import { PROVIDER_CONFIG_INVALID } from './refresh.errors';

/** The names a shell can export: what `{"env": …}` may refer to. */
export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export interface EnvReference {
  /** Where in the config, as a key path (`access_key`, `endpoints[0].sqs`). */
  at: string;
  name: string;
}

/**
 * Provider config values written `{"env": "NAME"}` stand for the variable
 * NAME of whoever runs the provider. An object whose only member is `env`
 * is such a reference; its `env` member, unchecked (see `envReferenceProblem`).
 */
export function envMemberOf(value: JsonValue | undefined): { env: JsonValue } | null {
  if (!isJsonObject(value)) return null;
  const keys = Object.keys(value).filter((k) => value[k] !== undefined);
  return keys.length === 1 && keys[0] === 'env' ? { env: value.env as JsonValue } : null;
}

/** Every reference in a config, in document order; a malformed one is PROVIDER_CONFIG.INVALID. */
export function envReferences(config: JsonValue): EnvReference[] {
  const out: EnvReference[] = [];
  const walk = (value: JsonValue | undefined, at: string): void => {
    const member = envMemberOf(value);
    if (member) {
      const problem = envReferenceProblem(member.env);
      if (problem) {
        throw new DomainError(
          PROVIDER_CONFIG_INVALID,
          `{"env": …} at ${at || 'the top level'} ${problem}`,
          { at },
        );
      }
      out.push({ at, name: member.env as string });
      return;
    }
    if (Array.isArray(value)) value.forEach((v, i) => walk(v, jsonPath(at, i)));
    else if (isJsonObject(value))
      for (const k of Object.keys(value)) walk(value[k], jsonPath(at, k));
  };
  walk(config, '');
  return out;
}

/** Why `{"env": value}` names no variable; null when it does. */
function envReferenceProblem(value: JsonValue): string | null {
  if (typeof value !== 'string') {
    return `must name an environment variable as a string, got ${JSON.stringify(value)}`;
  }
  if (!ENV_NAME.test(value)) {
    return `names "${value}", which is not an environment variable name (letters, digits and _, not starting with a digit)`;
  }
  return null;
}
