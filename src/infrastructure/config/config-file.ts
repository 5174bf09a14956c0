import { readConfigText } from './config-text';
import { isMap, isScalar, isSeq, LineCounter, parseDocument } from 'yaml';
import { redactUrls } from '../logging/redact';
import { ConfigError } from './config';

/**
 * Every variable kld reads, with its default as the README states it.
 * A config file takes exactly these names.
 */
export const CONFIG_VARIABLES = {
  KL_LISTEN: '127.0.0.1:8080',
  KL_DATABASE_URL: null,
  KL_DATA_DIR: './.kilolock',
  KL_LOG_LEVEL: 'info',
  KL_LOG_FORMAT: 'auto',
  KL_MAX_STATE_BYTES: '512MiB',
  KL_MAX_LOCK_BYTES: '64KiB',
  KL_HTTP_IDLE_TIMEOUT: '65s',
  KL_ALLOWED_ORIGINS: null,
  KL_PROVIDER_PATH: null,
  KL_REFRESH_EVERY: null,
  KL_REFRESH_STATES: null,
  KL_REFRESH_ENV_ALLOW: null,
  KL_CACHE_STREAMS: '500',
  KL_CACHE_REFRESH_RUNS: '100',
  KL_CACHE_HASH_INSTANCES: '100000',
  KL_CACHE_DOCUMENT_INSTANCES: '200000',
  KL_CACHE_SERVED_BYTES: '256MiB',
  KL_CACHE_HELD_EVENTS: '250000',
  KL_CALLER_QUERIES: '5',
  KL_CALLER_EXPORTS: '4',
  KL_CALLER_SUBSCRIPTIONS: '8',
  KL_CALLER_ENGINE_REQUESTS: '4',
  KL_CALLER_RUN_REQUESTS: '8',
  KL_TOTAL_QUERIES: '10',
  KL_TOTAL_EXPORTS: '8',
  KL_TOTAL_SUBSCRIPTIONS: '256',
  KL_TOTAL_ENGINE_REQUESTS: '10',
  KL_TOTAL_RUN_REQUESTS: '16',
  KL_GRPC_LISTEN: '127.0.0.1:8081',
  KL_AUTH: 'auto',
  KL_UNLOGGED_READ_MODELS: 'auto',
  KL_TLS_CERT: null,
  KL_TLS_KEY: null,
  KL_TLS_CLIENT_CA: null,
} as const satisfies Record<string, string | null>;

export type ConfigVariable = keyof typeof CONFIG_VARIABLES;
const NAMES = Object.keys(CONFIG_VARIABLES) as ConfigVariable[];

export type ConfigSource = 'default' | 'file' | 'environment';

/** The variables as kld sees them: the file's under the environment's. */
export interface EffectiveEnvironment {
  env: NodeJS.ProcessEnv;
  sourceOf(name: ConfigVariable): ConfigSource;
}

/**
 * A YAML (or JSON) mapping of the variables' names to their values, e.g.
 * `KL_LISTEN: 0.0.0.0:8080`. A list stands for a comma-separated value
 * (`KL_ALLOWED_ORIGINS: [https://a.example, https://b.example]`), a number
 * or boolean for its text, `null` for unset. Anything else is refused with
 * one line naming the file and the place.
 */
export function readConfigFile(file: string): Partial<Record<ConfigVariable, string>> {
  let text: string;
  try {
    text = readConfigText(file);
  } catch (err) {
    throw new ConfigError(`--config ${file}: ${(err as Error).message}`);
  }
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false });
  const at = (offset: number | undefined) => `line ${lines.linePos(offset ?? 0).line}`;
  if (doc.errors.length > 0) {
    const e = doc.errors[0];
    const first = e.message.split('\n')[0];
    throw new ConfigError(`${file}: ${at(e.pos[0])}: not valid YAML (${first})`);
  }
  if (doc.contents === null) return {};
  if (!isMap(doc.contents)) {
    throw new ConfigError(
      `${file}: expected a mapping of KL_* names to values, e.g. KL_LISTEN: 0.0.0.0:8080`,
    );
  }
  const out: Partial<Record<ConfigVariable, string>> = {};
  for (const pair of doc.contents.items) {
    const key = isScalar(pair.key) ? pair.key.value : null;
    const where = at(isScalar(pair.key) ? pair.key.range?.[0] : undefined);
    if (typeof key !== 'string' || !(NAMES as string[]).includes(key)) {
      throw new ConfigError(
        `${file}: ${where}: unknown setting ${shownKey(key)}; settings are named like the environment variables: ${NAMES.join(', ')}`,
      );
    }
    const value = textOf(pair.value);
    if (value === undefined) {
      throw new ConfigError(
        `${file}: ${where}: ${key}: expected a string, a number, a boolean or a list of them`,
      );
    }
    if (value !== null) out[key as ConfigVariable] = value;
  }
  return out;
}

function shownKey(key: unknown): string {
  const text = typeof key === 'string' ? key : JSON.stringify(key ?? null);
  return `"${redactUrls(String(text)).slice(0, 80)}"`;
}

/** The value's text; null for null; undefined for what no variable can hold. */
function textOf(node: unknown): string | null | undefined {
  if (node === null || node === undefined) return null;
  if (isScalar(node)) {
    const v = node.value;
    if (v === null) return null;
    if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return String(v);
    return undefined;
  }
  if (isSeq(node)) {
    const items = node.items.map(textOf);
    if (items.some((i) => i === null || i === undefined)) return undefined;
    return items.join(',');
  }
  return undefined;
}

/**
 * Precedence, lowest first: defaults, the config file, the environment (a
 * variable set in the environment wins, even when set empty), then
 * command-line flags (`kld serve --listen`).
 */
export function effectiveEnvironment(
  env: NodeJS.ProcessEnv,
  file: string | undefined,
): EffectiveEnvironment {
  const fromFile = file === undefined ? {} : readConfigFile(file);
  const merged: NodeJS.ProcessEnv = { ...fromFile, ...env };
  return {
    env: merged,
    sourceOf: (name) =>
      env[name] !== undefined ? 'environment' : fromFile[name] !== undefined ? 'file' : 'default',
  };
}

/**
 * `kld config`: one `NAME: value # source` line per variable, valid YAML
 * (values are JSON strings), every URL's password masked.
 */
export function describeConfig(effective: EffectiveEnvironment, file: string | undefined): string {
  const lines = [
    `# kld's effective configuration; precedence: flags > environment > ${file ?? 'config file (none given)'} > defaults`,
  ];
  for (const name of NAMES) {
    const source = effective.sourceOf(name);
    const value = source === 'default' ? CONFIG_VARIABLES[name] : (effective.env[name] ?? null);
    const shown = value === null ? 'null' : JSON.stringify(redactUrls(value));
    lines.push(`${name}: ${shown} # ${source === 'file' ? file : source}`);
  }
  return `${lines.join('\n')}\n`;
}
