import { Command } from 'commander';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { readConfigText, somethingAt } from '../infrastructure/config/config-text';
import { Protocol, PROTOCOLS } from '../application/apply/state-lanes';
import { redactUrls } from '../infrastructure/logging/redact';
import { KlError } from './cli-error';

/**
 * Where `kl` finds the state it works on and how it talks to it (ADR 0029
 * D7): flags > KL_* environment > `.kl.toml` > the directory's terraform
 * `backend "http"` block. `kl config` prints the result and each source.
 */

export type Source = 'flag' | 'env' | '.kl.toml' | 'backend "http"' | 'default' | 'unset';

export interface Resolved<T> {
  value: T;
  source: Source;
  /** The variable, file or flag it came from, for `kl config`. */
  from?: string;
}

export interface KlConfig {
  stateUrl: Resolved<string | null>;
  protocol: Resolved<Protocol>;
  /** A secret: printed only as set/unset. */
  token: Resolved<string | null>;
  /** kld's base URL and the state's name, from state_url. */
  server: string | null;
  state: string | null;
}

export interface KlConfigInputs {
  flags: { stateUrl?: string; protocol?: string; token?: string };
  env: Record<string, string | undefined>;
  /** `.kl.toml`'s text and path, when there is one. */
  toml?: { text: string; path: string };
  /**
   * The directory's `*.tf` files (name → text), read only when nothing before
   * the backend block names the state: a root module's files can be many and big.
   */
  terraformFiles?: () => Record<string, string>;
}

interface TomlConfig {
  state_url?: string;
  protocol?: string;
  tokenEnv?: string;
}

function fail(message: string): never {
  throw new KlError('CONFIG.INVALID', message);
}

function readToml(toml: { text: string; path: string }): TomlConfig {
  let doc: Record<string, unknown>;
  try {
    doc = parseToml(toml.text) as Record<string, unknown>;
  } catch (err) {
    fail(`${toml.path}: not valid TOML: ${(err as Error).message.split('\n')[0]}`);
  }
  const known = ['state_url', 'protocol', 'auth'];
  for (const key of Object.keys(doc)) {
    if (!known.includes(key)) fail(`${toml.path}: unknown key ${key} (known: ${known.join(', ')})`);
  }
  const str = (v: unknown, key: string) => {
    if (v === undefined) return undefined;
    if (typeof v !== 'string' || v === '') fail(`${toml.path}: ${key} must be a non-empty string`);
    return v;
  };
  const auth = doc.auth;
  if (auth !== undefined && (typeof auth !== 'object' || auth === null || Array.isArray(auth))) {
    fail(`${toml.path}: [auth] must be a table`);
  }
  const authTable = (auth ?? {}) as Record<string, unknown>;
  for (const key of Object.keys(authTable)) {
    if (key !== 'token_env') fail(`${toml.path}: unknown key auth.${key} (known: auth.token_env)`);
  }
  return {
    state_url: str(doc.state_url, 'state_url'),
    protocol: str(doc.protocol, 'protocol'),
    tokenEnv: str(authTable.token_env, 'auth.token_env'),
  };
}

/** The `address` of the first `backend "http"` block among the files, with its file. */
export function backendAddress(
  files: Record<string, string>,
): { address: string; file: string } | null {
  for (const file of Object.keys(files).sort()) {
    // Whole-line comments only: a URL holds `//`.
    const text = files[file].replace(/^\s*(#|\/\/)[^\n]*/gm, '');
    const start = /backend\s+"http"\s*\{/.exec(text);
    if (start === null) continue;
    const body = text.slice(start.index + start[0].length);
    const end = body.indexOf('}');
    const m = /(?:^|\n)\s*address\s*=\s*"([^"]*)"/.exec(end < 0 ? body : body.slice(0, end));
    if (m !== null) return { address: m[1], file };
  }
  return null;
}

function protocolOf(value: string, where: string): Protocol {
  if (!(PROTOCOLS as readonly string[]).includes(value)) {
    fail(`${where}: protocol must be one of ${PROTOCOLS.join(', ')}, got "${value}"`);
  }
  return value as Protocol;
}

/**
 * The URL without a user and password in it, for what kl keeps or shows (a
 * plan file travels between CI jobs and its JSON lands in logs); requests
 * still send them.
 */
export function withoutCredentials(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/?#]*@/i, '$1');
}

/** kld's base URL and the state name of a state URL (`…/v1/states/<name>`). */
export function splitStateUrl(url: string, where: string): { server: string; state: string } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    fail(`${where}: state_url is not a URL: "${redactUrls(url)}"`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    fail(`${where}: state_url must be an http(s) URL`);
  }
  const m = /^(.*?)\/v1\/states\/(.+?)\/*$/.exec(parsed.pathname);
  if (m === null) fail(`${where}: state_url must look like https://kld.example/v1/states/<name>`);
  let state: string;
  try {
    state = decodeURIComponent(m[2]);
  } catch {
    fail(`${where}: the state name in state_url is not valid percent-encoding`);
  }
  return { server: `${parsed.origin}${m[1]}`, state };
}

export function resolveKlConfig(inputs: KlConfigInputs): KlConfig {
  const { flags, env } = inputs;
  const toml = inputs.toml === undefined ? {} : readToml(inputs.toml);
  const tomlPath = inputs.toml?.path;
  const backend = () => backendAddress(inputs.terraformFiles?.() ?? {});

  let stateUrl: Resolved<string | null>;
  if (flags.stateUrl) stateUrl = { value: flags.stateUrl, source: 'flag', from: '--state-url' };
  else if (env.KL_STATE_URL)
    stateUrl = { value: env.KL_STATE_URL, source: 'env', from: 'KL_STATE_URL' };
  else if (toml.state_url) stateUrl = { value: toml.state_url, source: '.kl.toml', from: tomlPath };
  else {
    const block = backend();
    stateUrl = block
      ? { value: block.address, source: 'backend "http"', from: block.file }
      : { value: null, source: 'unset' };
  }

  let protocol: Resolved<Protocol>;
  if (flags.protocol) {
    protocol = {
      value: protocolOf(flags.protocol, '--protocol'),
      source: 'flag',
      from: '--protocol',
    };
  } else if (env.KL_PROTOCOL) {
    protocol = {
      value: protocolOf(env.KL_PROTOCOL, 'KL_PROTOCOL'),
      source: 'env',
      from: 'KL_PROTOCOL',
    };
  } else if (toml.protocol) {
    protocol = { value: protocolOf(toml.protocol, tomlPath!), source: '.kl.toml', from: tomlPath };
  } else protocol = { value: 'auto', source: 'default' };

  let token: Resolved<string | null>;
  if (flags.token) token = { value: flags.token, source: 'flag', from: '--token' };
  else if (env.KL_TOKEN) token = { value: env.KL_TOKEN, source: 'env', from: 'KL_TOKEN' };
  else if (toml.tokenEnv !== undefined) {
    const value = env[toml.tokenEnv];
    if (!value) fail(`${tomlPath}: auth.token_env names ${toml.tokenEnv}, which is not set`);
    token = { value, source: '.kl.toml', from: `${tomlPath} auth.token_env = ${toml.tokenEnv}` };
  } else token = { value: null, source: 'unset' };

  const where = stateUrl.from ?? 'state_url';
  const split = stateUrl.value === null ? null : splitStateUrl(stateUrl.value, where);
  return {
    stateUrl,
    protocol,
    token,
    server: split?.server ?? null,
    state: split?.state ?? null,
  };
}

function tomlText(file: string): string {
  try {
    return readConfigText(file);
  } catch (err) {
    fail(`.kl.toml: ${(err as Error).message}`);
  }
}

/** Reads the inputs from the command line, the environment and the working directory. */
export function loadKlConfig(command: Command, cwd = process.cwd()): KlConfig {
  const opts = command.optsWithGlobals<{ stateUrl?: string; protocol?: string; token?: string }>();
  // --token defaults to KL_TOKEN: only a token given on the command line is a flag.
  const tokenFromCli = command.getOptionValueSourceWithGlobals('token') === 'cli';
  const tomlPath = path.join(cwd, '.kl.toml');
  // A link to nowhere, a loop of links, a directory are mistakes to name,
  // not an absent file to pass over: kl would go on with other settings.
  const toml = somethingAt(tomlPath) ? { text: tomlText(tomlPath), path: '.kl.toml' } : undefined;
  const terraformFiles = () => {
    const files: Record<string, string> = {};
    for (const name of fs.readdirSync(cwd)) {
      if (name.endsWith('.tf')) files[name] = fs.readFileSync(path.join(cwd, name), 'utf8');
    }
    return files;
  };
  return resolveKlConfig({
    flags: {
      stateUrl: opts.stateUrl,
      protocol: opts.protocol,
      token: tokenFromCli ? opts.token : undefined,
    },
    env: process.env,
    toml,
    terraformFiles,
  });
}
