import * as net from 'node:net';
import * as path from 'node:path';
import { redactUrls } from '../logging/redact';
import { stateNameFrom } from '../http/state-name';
import {
  CALLER_LIMIT_VARIABLES,
  CallerLimits,
  DEFAULT_CALLER_LIMITS,
  DEFAULT_TOTAL_LIMITS,
  HEAVY_KINDS,
  HeavyKind,
  TOTAL_LIMIT_VARIABLES,
} from '../http/caller-limits';
import { DEFAULT_IDLE_MS } from '../http/connection-drain';
import { connectTimeoutSeconds } from '../postgres/connection-options';
import { CacheBudgets, DEFAULT_CACHE_BUDGETS } from '../../application/bounded-cache';
import { DomainError } from '../../domain/shared/domain-error';

/** DI token of the process's Config. */
export const CONFIG = Symbol('Config');

/** Everything kld reads from its environment, validated once at start. */
export interface Config {
  listen: { host: string; port: number };
  /** KL_GRPC_LISTEN: where the gRPC event service listens; null when `off`. */
  grpcListen: { host: string; port: number } | null;
  databaseUrl: string | null;
  dataDir: string;
  /** KL_DATA_DIR was given; otherwise dataDir is the default, which kld may move (server.ts). */
  dataDirExplicit: boolean;
  logLevel: 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal';
  /** KL_LOG_FORMAT: `auto` is pretty on a terminal, JSON otherwise. */
  logFormat: 'auto' | 'json' | 'pretty';
  maxStateBytes: number;
  maxLockBytes: number;
  /** KL_REFRESH_EVERY in ms: how often kld refreshes `refreshStates`; null = never. */
  refreshEvery: number | null;
  /** KL_REFRESH_STATES, comma-separated state names. */
  refreshStates: string[];
  /** KL_ALLOWED_ORIGINS: browser origins besides kld's own that may send requests. */
  allowedOrigins: string[];
  /** KL_REFRESH_ENV_ALLOW: globs of the `{"env": …}` names a server-side refresh may read. */
  refreshEnvAllow: string[];
  /** KL_CACHE_*: what each in-process cache may hold. */
  cache: CacheBudgets;
  /** KL_CALLER_*: how many heavy requests of each kind one caller may have in flight. */
  callerLimits: CallerLimits;
  /** KL_TOTAL_*: how many heavy requests of each kind all callers together may have in flight. */
  totalLimits: CallerLimits;
  /**
   * KL_AUTH (`auto`, `on`, `off`): `auto` turns authentication on unless kld
   * listens on loopback only. `enabled` is the outcome.
   */
  auth: { mode: 'auto' | 'on' | 'off'; enabled: boolean };
  /**
   * KL_UNLOGGED_READ_MODELS (`auto`, `on`, `off`): the bulk read models as
   * UNLOGGED tables (no WAL; emptied by a crash, then rebuilt from the log).
   * `auto` is on with the embedded PostgreSQL, off with KL_DATABASE_URL.
   */
  unloggedReadModels: boolean;
  /** KL_TLS_CERT/KL_TLS_KEY (PEM files), and KL_TLS_CLIENT_CA to require client certificates. */
  tls: { certFile: string; keyFile: string; clientCaFile: string | null } | null;
  /** KL_PROVIDER_PATH, colon-separated provider directories for server-side refresh. */
  providerPath: string | null;
  /**
   * KL_HTTP_IDLE_TIMEOUT in ms: how long kld keeps a connection with no request
   * (HTTP keep-alive, gRPC with no call), and waits for a reader that takes
   * nothing of a big answer before cutting it off.
   */
  idleMs: number;
}

/** A bad variable: kld stops with one line naming it (exit status 2). */
export class ConfigError extends DomainError {
  constructor(message: string) {
    super('CONFIG.INVALID', message);
    this.name = 'ConfigError';
  }
}

const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;
const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;

const KIB = 1024;
const MIB = 1024 ** 2;
/**
 * A state document becomes one JavaScript string (V8 caps strings at about
 * 512 MiB) and one PostgreSQL `json` value (1 GB cap): nothing larger can be
 * stored, so a larger limit would only promise what fails later.
 */
const STATE_BYTES_MAX = 512 * MIB;
const LOCK_BYTES_MAX = 1 * MIB;
const REFRESH_EVERY_MIN_MS = 10_000;
const REFRESH_EVERY_MAX_MS = 365 * 86_400_000;
/**
 * The idle bound must outlast a load balancer's idle timeout (AWS ALB's goes
 * up to 4,000 s): a balancer that reuses a connection kld is closing answers 502.
 */
const IDLE_MIN_MS = 1_000;
const IDLE_MAX_MS = 7_200_000;

/** A value as an error may show it: trimmed, shortened, any URL password masked. */
function shown(value: string): string {
  const text = redactUrls(value.trim());
  return text.length > 120 ? `${text.slice(0, 120)}…` : text;
}

/** `host:port`, `[v6]:port` or `:port` (loopback); the host an IP literal or a DNS name. */
export function parseListen(value: string, name = 'KL_LISTEN'): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(value.trim());
  const port = m ? Number(m[3]) : NaN;
  const host = m ? (m[1] ?? (m[2] || '127.0.0.1')) : '';
  const hostOk = m?.[1] !== undefined ? net.isIPv6(host) : net.isIPv4(host) || isDnsName(host);
  if (!m || port > 65535 || !hostOk) {
    throw new ConfigError(
      `${name}: expected host:port (e.g. 127.0.0.1:8080 or [::1]:8080), got "${shown(value)}"`,
    );
  }
  return { host, port };
}

function isDnsName(host: string): boolean {
  return (
    host.length <= 253 &&
    !/^[\d.]+$/.test(host) && // 1.2.3 or 300.1.1.1: a mistyped address, not a name
    host.split('.').every((label) => /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/i.test(label))
  );
}

/** Byte sizes like 512MiB, 64KiB, 1GB or a plain number of bytes, within [min, max]. */
export function parseBytes(
  value: string,
  name: string,
  bounds: { min: number; max: number } = { min: 1, max: Number.MAX_SAFE_INTEGER },
): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(b|kib|kb|mib|mb|gib|gb)?\s*$/i.exec(value);
  if (!m) throw new ConfigError(`${name}: expected a size such as 512MiB, got "${shown(value)}"`);
  const unit = (m[2] ?? 'b').toLowerCase();
  const factor: Record<string, number> = {
    b: 1,
    kb: 1e3,
    kib: 1024,
    mb: 1e6,
    mib: 1024 ** 2,
    gb: 1e9,
    gib: 1024 ** 3,
  };
  const bytes = Math.floor(Number(m[1]) * factor[unit]);
  if (bytes < bounds.min || bytes > bounds.max) {
    throw new ConfigError(
      `${name}: expected a size from ${formatBytes(bounds.min)} to ${formatBytes(bounds.max)}, got "${shown(value)}"`,
    );
  }
  return bytes;
}

function formatBytes(n: number): string {
  if (n >= MIB && n % MIB === 0) return `${n / MIB}MiB`;
  if (n >= KIB && n % KIB === 0) return `${n / KIB}KiB`;
  return `${n} bytes`;
}

/** Durations like 15m, 1h30m, 90s, 500ms. */
export function parseDuration(value: string, name: string): number {
  const text = value.trim();
  const unit: Record<string, number> = { ms: 1, s: 1e3, m: 60e3, h: 3600e3, d: 86400e3 };
  const part = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/gy;
  let total = 0;
  let end = 0;
  for (let m = part.exec(text); m; m = part.exec(text)) {
    total += Number(m[1]) * unit[m[2]];
    end = part.lastIndex;
  }
  if (text === '' || end !== text.length) {
    throw new ConfigError(
      `${name}: expected a duration such as 15m, 1h or 90s, got "${shown(value)}"`,
    );
  }
  return Math.round(total);
}

/** KL_HTTP_IDLE_TIMEOUT: a duration from 1s to 2h, default DEFAULT_IDLE_MS. */
function idleFrom(raw: string | undefined): number {
  const value = raw?.trim() || null;
  if (value === null) return DEFAULT_IDLE_MS;
  const ms = parseDuration(value, 'KL_HTTP_IDLE_TIMEOUT');
  if (ms < IDLE_MIN_MS || ms > IDLE_MAX_MS) {
    throw new ConfigError(`KL_HTTP_IDLE_TIMEOUT: from 1s to 2h, got "${shown(value)}"`);
  }
  return ms;
}

/** The periodic refresh: both variables or neither, and not more often than every 10s. */
function refreshSchedule(env: NodeJS.ProcessEnv): Pick<Config, 'refreshEvery' | 'refreshStates'> {
  const every = env.KL_REFRESH_EVERY?.trim() || null;
  const states = (env.KL_REFRESH_STATES ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (every === null) return { refreshEvery: null, refreshStates: states };
  const ms = parseDuration(every, 'KL_REFRESH_EVERY');
  if (ms < REFRESH_EVERY_MIN_MS || ms > REFRESH_EVERY_MAX_MS) {
    throw new ConfigError(`KL_REFRESH_EVERY: from 10s to 365d, got "${shown(every)}"`);
  }
  if (states.length === 0) {
    throw new ConfigError('KL_REFRESH_STATES: name the states to refresh (comma-separated)');
  }
  for (const state of states) {
    try {
      stateNameFrom(state);
    } catch (err) {
      throw new ConfigError(`KL_REFRESH_STATES: ${(err as Error).message}`);
    }
  }
  return { refreshEvery: ms, refreshStates: [...new Set(states)] };
}

function oneOf<T extends string>(
  name: string,
  raw: string | undefined,
  values: readonly T[],
  fallback: T,
): T {
  const value = (raw?.trim() || fallback).toLowerCase();
  if (!(values as readonly string[]).includes(value)) {
    throw new ConfigError(`${name}: expected one of ${values.join(', ')}, got "${shown(value)}"`);
  }
  return value as T;
}

/** Only PostgreSQL URLs that parse; an error shows the URL with its password masked. */
function databaseUrlFrom(raw: string | undefined): string | null {
  const value = raw?.trim() || null;
  if (value === null) return null;
  const usage = 'expected postgres://user:password@host:port/database';
  if (!/^postgres(ql)?:\/\//i.test(value)) {
    throw new ConfigError(`KL_DATABASE_URL: ${usage}, got "${shown(value)}"`);
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(
      `KL_DATABASE_URL: not a valid URL (${usage}; percent-encode special characters in the password), got "${shown(value)}"`,
    );
  }
  if (!url.hostname && !url.searchParams.get('host')) {
    throw new ConfigError(`KL_DATABASE_URL: names no host (${usage}), got "${shown(value)}"`);
  }
  try {
    connectTimeoutSeconds(value);
  } catch (err) {
    throw new ConfigError(`KL_DATABASE_URL: ${(err as Error).message}`);
  }
  return value;
}

/**
 * KL_ALLOWED_ORIGINS: comma-separated `scheme://host[:port]`, normalised the
 * way browsers write the Origin header (lower-case host, default port dropped).
 */
function allowedOriginsFrom(raw: string | undefined): string[] {
  const origins: string[] = [];
  for (const item of (raw ?? '').split(',').map((s) => s.trim())) {
    if (item === '') continue;
    let url: URL | null = null;
    try {
      url = new URL(item);
    } catch {
      // reported below
    }
    const bare =
      url !== null &&
      (url.protocol === 'http:' || url.protocol === 'https:') &&
      url.username === '' &&
      url.password === '' &&
      url.search === '' &&
      url.hash === '' &&
      (url.pathname === '/' || url.pathname === '') &&
      !item.endsWith('/');
    if (!bare || url === null) {
      throw new ConfigError(
        `KL_ALLOWED_ORIGINS: expected comma-separated origins such as https://kilolock.example.com or http://localhost:3000 (scheme, host and port only), got "${shown(item)}"`,
      );
    }
    origins.push(url.origin);
  }
  return [...new Set(origins)];
}

/**
 * KL_REFRESH_ENV_ALLOW, comma-separated variable names or globs (`*`, `?`).
 * Unset or empty allows none: a provider config is written over the API, so
 * without it anyone who may write one could have kld send its environment
 * wherever the config points.
 */
function refreshEnvAllowFrom(raw: string | undefined): string[] {
  const globs = (raw ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  for (const glob of globs) {
    if (!/^[A-Za-z0-9_*?]+$/.test(glob)) {
      throw new ConfigError(
        `KL_REFRESH_ENV_ALLOW: "${shown(glob)}" is not a variable name or glob (letters, digits, _, * and ?), e.g. AWS_*,ARM_CLIENT_ID`,
      );
    }
  }
  return [...new Set(globs)];
}

/** A whole number within [min, max], or the default when unset or blank. */
function countFrom(
  raw: string | undefined,
  name: string,
  fallback: number,
  bounds: { min: number; max: number },
): number {
  const value = raw?.trim() ?? '';
  if (value === '') return fallback;
  const n = /^\d{1,15}$/.test(value) ? Number(value) : NaN;
  if (!(n >= bounds.min && n <= bounds.max)) {
    throw new ConfigError(
      `${name}: expected a whole number from ${bounds.min} to ${bounds.max}, got "${shown(value)}"`,
    );
  }
  return n;
}

/** The cache budgets (README, Configuration); each defaults to DEFAULT_CACHE_BUDGETS. */
function cacheBudgetsFrom(env: NodeJS.ProcessEnv): CacheBudgets {
  const d = DEFAULT_CACHE_BUDGETS;
  return {
    streams: countFrom(env.KL_CACHE_STREAMS, 'KL_CACHE_STREAMS', d.streams, {
      min: 1,
      max: 1_000_000,
    }),
    refreshRuns: countFrom(env.KL_CACHE_REFRESH_RUNS, 'KL_CACHE_REFRESH_RUNS', d.refreshRuns, {
      min: 1,
      max: 100_000,
    }),
    hashInstances: countFrom(
      env.KL_CACHE_HASH_INSTANCES,
      'KL_CACHE_HASH_INSTANCES',
      d.hashInstances,
      { min: 1, max: 100_000_000 },
    ),
    documentInstances: countFrom(
      env.KL_CACHE_DOCUMENT_INSTANCES,
      'KL_CACHE_DOCUMENT_INSTANCES',
      d.documentInstances,
      { min: 1, max: 100_000_000 },
    ),
    servedBytes:
      env.KL_CACHE_SERVED_BYTES === undefined || env.KL_CACHE_SERVED_BYTES.trim() === ''
        ? d.servedBytes
        : parseBytes(env.KL_CACHE_SERVED_BYTES, 'KL_CACHE_SERVED_BYTES', {
            min: KIB,
            max: 64 * 1024 * MIB,
          }),
    heldEvents: countFrom(env.KL_CACHE_HELD_EVENTS, 'KL_CACHE_HELD_EVENTS', d.heldEvents, {
      min: 0,
      max: 100_000_000,
    }),
  };
}

/**
 * The per-caller bounds (`KL_CALLER_*`, DEFAULT_CALLER_LIMITS) or the bounds
 * across callers (`KL_TOTAL_*`, DEFAULT_TOTAL_LIMITS); README, Configuration.
 */
function limitsFrom(
  env: NodeJS.ProcessEnv,
  variables: Record<HeavyKind, string>,
  defaults: CallerLimits,
): CallerLimits {
  const limits = { ...defaults };
  for (const kind of HEAVY_KINDS) {
    const name = variables[kind];
    limits[kind] = countFrom(env[name], name, defaults[kind], { min: 1, max: 100_000 });
  }
  return limits;
}

/** KL_GRPC_LISTEN: host:port like KL_LISTEN, or `off`; never KL_LISTEN's own port. */
function grpcListenFrom(
  raw: string | undefined,
  http: { host: string; port: number },
): Config['grpcListen'] {
  const value = raw?.trim() || '127.0.0.1:8081';
  if (value.toLowerCase() === 'off') return null;
  const listen = parseListen(value, 'KL_GRPC_LISTEN');
  if (listen.port !== 0 && listen.port === http.port) {
    throw new ConfigError(
      `KL_GRPC_LISTEN: port ${listen.port} is the HTTP port (KL_LISTEN); pick another, or off`,
    );
  }
  return listen;
}

const AUTH_MODES = ['auto', 'on', 'off'] as const;

/** A standby has no unlogged rows: with a database of one's own, only on the operator's word. */
function unloggedReadModelsFrom(raw: string | undefined, databaseUrl: string | null): boolean {
  const mode = oneOf('KL_UNLOGGED_READ_MODELS', raw, AUTH_MODES, 'auto');
  return mode === 'on' || (mode === 'auto' && databaseUrl === null);
}

/** 127.0.0.0/8, ::1 and `localhost`: nobody else can connect. */
export function isLoopback(host: string): boolean {
  return (
    (net.isIPv4(host) && host.startsWith('127.')) ||
    host === '::1' ||
    host.toLowerCase() === 'localhost'
  );
}

function tlsFrom(env: NodeJS.ProcessEnv): Config['tls'] {
  const cert = env.KL_TLS_CERT?.trim() || null;
  const key = env.KL_TLS_KEY?.trim() || null;
  const clientCa = env.KL_TLS_CLIENT_CA?.trim() || null;
  if (cert === null && key === null) {
    if (clientCa !== null) {
      throw new ConfigError(
        'KL_TLS_CLIENT_CA: needs KL_TLS_CERT and KL_TLS_KEY (client certificates are a TLS feature)',
      );
    }
    return null;
  }
  if (cert === null || key === null) {
    throw new ConfigError(
      `${cert === null ? 'KL_TLS_CERT' : 'KL_TLS_KEY'}: set KL_TLS_CERT and KL_TLS_KEY together (PEM files of the server's certificate and key)`,
    );
  }
  return {
    certFile: path.resolve(cert),
    keyFile: path.resolve(key),
    clientCaFile: clientCa === null ? null : path.resolve(clientCa),
  };
}

export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  overrides: { listen?: string } = {},
): Config {
  const listenRaw = overrides.listen ?? env.KL_LISTEN ?? '127.0.0.1:8080';
  const databaseUrl = databaseUrlFrom(env.KL_DATABASE_URL);
  const listen = parseListen(listenRaw, overrides.listen ? '--listen' : 'KL_LISTEN');
  const authMode = oneOf('KL_AUTH', env.KL_AUTH, AUTH_MODES, 'auto');
  return {
    listen,
    grpcListen: grpcListenFrom(env.KL_GRPC_LISTEN, listen),
    databaseUrl,
    dataDir: path.resolve(env.KL_DATA_DIR ?? '.kilolock'),
    dataDirExplicit: env.KL_DATA_DIR !== undefined,
    logLevel: oneOf('KL_LOG_LEVEL', env.KL_LOG_LEVEL, LOG_LEVELS, 'info'),
    logFormat: oneOf('KL_LOG_FORMAT', env.KL_LOG_FORMAT, LOG_FORMATS, 'auto'),
    maxStateBytes: parseBytes(env.KL_MAX_STATE_BYTES ?? '512MiB', 'KL_MAX_STATE_BYTES', {
      min: KIB,
      max: STATE_BYTES_MAX,
    }),
    maxLockBytes: parseBytes(env.KL_MAX_LOCK_BYTES ?? '64KiB', 'KL_MAX_LOCK_BYTES', {
      min: KIB,
      max: LOCK_BYTES_MAX,
    }),
    ...refreshSchedule(env),
    allowedOrigins: allowedOriginsFrom(env.KL_ALLOWED_ORIGINS),
    refreshEnvAllow: refreshEnvAllowFrom(env.KL_REFRESH_ENV_ALLOW),
    cache: cacheBudgetsFrom(env),
    callerLimits: limitsFrom(env, CALLER_LIMIT_VARIABLES, DEFAULT_CALLER_LIMITS),
    totalLimits: limitsFrom(env, TOTAL_LIMIT_VARIABLES, DEFAULT_TOTAL_LIMITS),
    auth: {
      mode: authMode,
      enabled: authMode === 'on' || (authMode === 'auto' && !isLoopback(listen.host)),
    },
    unloggedReadModels: unloggedReadModelsFrom(env.KL_UNLOGGED_READ_MODELS, databaseUrl),
    tls: tlsFrom(env),
    providerPath: env.KL_PROVIDER_PATH?.trim() || null,
    idleMs: idleFrom(env.KL_HTTP_IDLE_TIMEOUT),
  };
}
