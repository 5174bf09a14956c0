import * as path from 'node:path';

/** Everything kld reads from its environment, validated once at start. */
export interface Config {
  listen: { host: string; port: number };
  databaseUrl: string | null;
  dataDir: string;
  logLevel: 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal';
  maxStateBytes: number;
  maxLockBytes: number;
  /** KL_REFRESH_EVERY in ms: how often kld refreshes `refreshStates`; null = never. */
  refreshEvery: number | null;
  /** KL_REFRESH_STATES, comma-separated state names. */
  refreshStates: string[];
}

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;

export function parseListen(value: string, name = 'KL_LISTEN'): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(value.trim());
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) {
    throw new ConfigError(`${name}: expected host:port (e.g. 127.0.0.1:8080), got "${value}"`);
  }
  return { host: m[1] ?? (m[2] || '127.0.0.1'), port };
}

/** Byte sizes like 512MiB, 64KiB, 1GB or a plain number of bytes. */
export function parseBytes(value: string, name: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(b|kib|kb|mib|mb|gib|gb)?\s*$/i.exec(value);
  if (!m) throw new ConfigError(`${name}: expected a size such as 512MiB, got "${value}"`);
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
  return Math.floor(Number(m[1]) * factor[unit]);
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
    throw new ConfigError(`${name}: expected a duration such as 15m, 1h or 90s, got "${value}"`);
  }
  return Math.round(total);
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
  if (ms < 10_000) throw new ConfigError(`KL_REFRESH_EVERY: at least 10s, got "${every}"`);
  if (states.length === 0) {
    throw new ConfigError('KL_REFRESH_STATES: name the states to refresh (comma-separated)');
  }
  return { refreshEvery: ms, refreshStates: [...new Set(states)] };
}

export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  overrides: { listen?: string } = {},
): Config {
  const listenRaw = overrides.listen ?? env.KL_LISTEN ?? '127.0.0.1:8080';
  const databaseUrl = env.KL_DATABASE_URL?.trim() || null;
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError(
      `KL_DATABASE_URL: expected postgres://user:pass@host:port/db, got "${databaseUrl}"`,
    );
  }
  const logLevel = (env.KL_LOG_LEVEL ?? 'info').toLowerCase();
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) {
    throw new ConfigError(
      `KL_LOG_LEVEL: expected one of ${LOG_LEVELS.join(', ')}, got "${logLevel}"`,
    );
  }
  return {
    listen: parseListen(listenRaw, overrides.listen ? '--listen' : 'KL_LISTEN'),
    databaseUrl,
    dataDir: path.resolve(env.KL_DATA_DIR ?? '.kilolock'),
    logLevel: logLevel as Config['logLevel'],
    maxStateBytes: parseBytes(env.KL_MAX_STATE_BYTES ?? '512MiB', 'KL_MAX_STATE_BYTES'),
    maxLockBytes: parseBytes(env.KL_MAX_LOCK_BYTES ?? '64KiB', 'KL_MAX_LOCK_BYTES'),
    ...refreshSchedule(env),
  };
}
