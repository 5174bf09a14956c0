import { ConfigError, loadConfig } from './config';

describe('loadConfig', () => {
  it('gives the documented defaults for an empty environment', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      listen: { host: '127.0.0.1', port: 8080 },
      databaseUrl: null,
      logLevel: 'info',
      logFormat: 'auto',
      maxStateBytes: 512 * 1024 ** 2,
      maxLockBytes: 64 * 1024,
      refreshEvery: null,
      refreshStates: [],
      allowedOrigins: [],
    });
  });

  it.each<[string, Record<string, string>, Record<string, unknown>]>([
    [
      'an IPv6 listen address',
      { KL_LISTEN: '[::1]:9000' },
      { listen: { host: '::1', port: 9000 } },
    ],
    [
      'a listen name',
      { KL_LISTEN: 'kld.internal:80' },
      { listen: { host: 'kld.internal', port: 80 } },
    ],
    ['all interfaces', { KL_LISTEN: '0.0.0.0:8080' }, { listen: { host: '0.0.0.0', port: 8080 } }],
    ['a bare port', { KL_LISTEN: ':8082' }, { listen: { host: '127.0.0.1', port: 8082 } }],
    ['an ephemeral port', { KL_LISTEN: '127.0.0.1:0' }, { listen: { host: '127.0.0.1', port: 0 } }],
    ['log level in capitals', { KL_LOG_LEVEL: 'DEBUG' }, { logLevel: 'debug' }],
    ['json logs', { KL_LOG_FORMAT: 'json' }, { logFormat: 'json' }],
    ['pretty logs', { KL_LOG_FORMAT: 'Pretty' }, { logFormat: 'pretty' }],
    ['sizes with units', { KL_MAX_STATE_BYTES: '1.5MiB' }, { maxStateBytes: 1.5 * 1024 ** 2 }],
    ['sizes in bytes', { KL_MAX_LOCK_BYTES: '2048' }, { maxLockBytes: 2048 }],
    [
      'a postgresql:// URL',
      { KL_DATABASE_URL: 'postgresql://u:p%40ss@db:5432/kl' },
      { databaseUrl: 'postgresql://u:p%40ss@db:5432/kl' },
    ],
    [
      'a periodic refresh',
      { KL_REFRESH_EVERY: '1h30m', KL_REFRESH_STATES: 'a/b, c,a/b' },
      { refreshEvery: 5_400_000, refreshStates: ['a/b', 'c'] },
    ],
    [
      'allowed origins, normalised as browsers send them',
      { KL_ALLOWED_ORIGINS: 'https://UI.example.com:443, http://localhost:3000,' },
      { allowedOrigins: ['https://ui.example.com', 'http://localhost:3000'] },
    ],
  ])('accepts %s', (_label, env, expected) => {
    expect(loadConfig(env)).toMatchObject(expected);
  });

  it.each<[string, string, RegExp]>([
    ['KL_LISTEN', 'not-an-address', /^KL_LISTEN: expected host:port/],
    ['KL_LISTEN', '127.0.0.1:70000', /^KL_LISTEN: expected host:port/],
    ['KL_LISTEN', '300.1.1.1:80', /^KL_LISTEN: expected host:port/],
    ['KL_LISTEN', 'bad_host!:80', /^KL_LISTEN: expected host:port/],
    ['KL_LISTEN', '[not-v6]:80', /^KL_LISTEN: expected host:port/],
    ['KL_LOG_LEVEL', 'loud', /^KL_LOG_LEVEL: expected one of trace, debug, info/],
    ['KL_LOG_FORMAT', 'xml', /^KL_LOG_FORMAT: expected one of auto, json, pretty, got "xml"$/],
    [
      'KL_MAX_STATE_BYTES',
      '0',
      /^KL_MAX_STATE_BYTES: expected a size from 1KiB to 512MiB, got "0"$/,
    ],
    ['KL_MAX_STATE_BYTES', '2GiB', /^KL_MAX_STATE_BYTES: expected a size from 1KiB to 512MiB/],
    ['KL_MAX_STATE_BYTES', 'huge', /^KL_MAX_STATE_BYTES: expected a size such as 512MiB/],
    ['KL_MAX_STATE_BYTES', '-5', /^KL_MAX_STATE_BYTES: expected a size such as 512MiB/],
    ['KL_MAX_LOCK_BYTES', '0.1KiB', /^KL_MAX_LOCK_BYTES: expected a size from 1KiB to 1MiB/],
    ['KL_MAX_LOCK_BYTES', '10MiB', /^KL_MAX_LOCK_BYTES: expected a size from 1KiB to 1MiB/],
    ['KL_DATABASE_URL', 'mysql://u:PW@h/db', /^KL_DATABASE_URL: expected postgres:\/\//],
    ['KL_DATABASE_URL', 'postgres://u:PW@h:99999/db', /^KL_DATABASE_URL: not a valid URL/],
    ['KL_DATABASE_URL', 'postgres:///db', /^KL_DATABASE_URL: names no host/],
    [
      'KL_DATABASE_URL',
      'postgres://u:PW@h/db?connect_timeout=soon',
      /^KL_DATABASE_URL: connect_timeout: expected whole seconds \(0 waits for ever\), got "soon"$/,
    ],
    ['KL_DATABASE_URL', 'postgres://u:PW@h/db?connect_timeout=-1', /connect_timeout: expected/],
    ['KL_ALLOWED_ORIGINS', '*', /^KL_ALLOWED_ORIGINS: expected comma-separated origins/],
    ['KL_ALLOWED_ORIGINS', 'example.com', /^KL_ALLOWED_ORIGINS: expected/],
    ['KL_ALLOWED_ORIGINS', 'https://example.com/app', /^KL_ALLOWED_ORIGINS: expected/],
    ['KL_ALLOWED_ORIGINS', 'https://example.com/', /^KL_ALLOWED_ORIGINS: expected/],
    ['KL_ALLOWED_ORIGINS', 'ftp://example.com', /^KL_ALLOWED_ORIGINS: expected/],
    ['KL_ALLOWED_ORIGINS', 'https://u:PW@example.com', /^KL_ALLOWED_ORIGINS: expected/],
  ])('refuses %s=%s with one line naming it', (name, value, message) => {
    const error = errorOf({ [name]: value });
    expect(error.message).toMatch(message);
    expect(error.message).not.toContain('\n');
    expect(error.message).not.toContain('PW');
  });

  it.each<[Record<string, string>, RegExp]>([
    [{ KL_REFRESH_EVERY: '5s', KL_REFRESH_STATES: 'a' }, /^KL_REFRESH_EVERY: from 10s to 365d/],
    [{ KL_REFRESH_EVERY: '400d', KL_REFRESH_STATES: 'a' }, /^KL_REFRESH_EVERY: from 10s to 365d/],
    [{ KL_REFRESH_EVERY: '15', KL_REFRESH_STATES: 'a' }, /^KL_REFRESH_EVERY: expected a duration/],
    [{ KL_REFRESH_EVERY: '15m' }, /^KL_REFRESH_STATES: name the states/],
    [{ KL_REFRESH_EVERY: '15m', KL_REFRESH_STATES: 'ok,../etc' }, /^KL_REFRESH_STATES: invalid/],
  ])('refuses the refresh schedule %j', (env, message) => {
    expect(errorOf(env).message).toMatch(message);
  });

  it('keeps idle connections 65 s unless KL_HTTP_IDLE_TIMEOUT says, from 1s to 2h', () => {
    expect(loadConfig({}).idleMs).toBe(65_000);
    expect(loadConfig({ KL_HTTP_IDLE_TIMEOUT: ' ' }).idleMs).toBe(65_000);
    expect(loadConfig({ KL_HTTP_IDLE_TIMEOUT: '4100s' }).idleMs).toBe(4_100_000);
    expect(loadConfig({ KL_HTTP_IDLE_TIMEOUT: '1s' }).idleMs).toBe(1_000);
    expect(loadConfig({ KL_HTTP_IDLE_TIMEOUT: '2h' }).idleMs).toBe(7_200_000);
  });

  it.each<[string, RegExp]>([
    ['65', /^KL_HTTP_IDLE_TIMEOUT: expected a duration such as 15m, 1h or 90s, got "65"$/],
    ['-5s', /^KL_HTTP_IDLE_TIMEOUT: expected a duration/],
    ['soon', /^KL_HTTP_IDLE_TIMEOUT: expected a duration/],
    ['0s', /^KL_HTTP_IDLE_TIMEOUT: from 1s to 2h, got "0s"$/],
    ['999ms', /^KL_HTTP_IDLE_TIMEOUT: from 1s to 2h, got "999ms"$/],
    ['2h1s', /^KL_HTTP_IDLE_TIMEOUT: from 1s to 2h, got "2h1s"$/],
  ])('refuses KL_HTTP_IDLE_TIMEOUT=%s with one line naming it', (value, message) => {
    const error = errorOf({ KL_HTTP_IDLE_TIMEOUT: value });
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.message).toMatch(message);
  });

  it('serves gRPC events on 127.0.0.1:8081 unless KL_GRPC_LISTEN says where, or off', () => {
    expect(loadConfig({}).grpcListen).toEqual({ host: '127.0.0.1', port: 8081 });
    expect(loadConfig({ KL_GRPC_LISTEN: '[::1]:9090' }).grpcListen).toEqual({
      host: '::1',
      port: 9090,
    });
    expect(loadConfig({ KL_GRPC_LISTEN: 'OFF' }).grpcListen).toBeNull();
    expect(errorOf({ KL_GRPC_LISTEN: 'grpc.example' }).message).toMatch(
      /^KL_GRPC_LISTEN: expected host:port/,
    );
    expect(errorOf({ KL_LISTEN: '127.0.0.1:9000', KL_GRPC_LISTEN: ':9000' }).message).toMatch(
      /^KL_GRPC_LISTEN: port 9000 is the HTTP port/,
    );
  });

  it('never shows a database password, however the URL is broken', () => {
    for (const url of [
      'mysql://kl:S3cr3t-PW@db/kl',
      'postgres://kl:S3cr3t-PW@db:99999/kl',
      'postgres://kl:S3cr3t-PW@/kl',
      'postgres://kl:S3cr3t@PW@db:99999/kl',
    ]) {
      const error = errorOf({ KL_DATABASE_URL: url });
      expect(error.message).toMatch(/^KL_DATABASE_URL: /);
      expect(error.message).not.toMatch(/S3cr3t|PW/);
      expect(error.message).toContain('kl:***@');
    }
  });
});

function errorOf(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`);
}

describe('KL_REFRESH_ENV_ALLOW', () => {
  it('is empty when unset or blank: a server-side refresh reads no variable', () => {
    expect(loadConfig({}).refreshEnvAllow).toEqual([]);
    expect(loadConfig({ KL_REFRESH_ENV_ALLOW: ' , ' }).refreshEnvAllow).toEqual([]);
  });

  it('takes comma-separated names and globs', () => {
    expect(
      loadConfig({ KL_REFRESH_ENV_ALLOW: 'AWS_* , ARM_CLIENT_ID,AWS_*' }).refreshEnvAllow,
    ).toEqual(['AWS_*', 'ARM_CLIENT_ID']);
  });

  it('stops the start on anything else, naming the variable', () => {
    for (const bad of ['AWS-KEY', 'a b', '{A,B}', 'X/Y']) {
      expect(() => loadConfig({ KL_REFRESH_ENV_ALLOW: bad })).toThrow(ConfigError);
      expect(() => loadConfig({ KL_REFRESH_ENV_ALLOW: bad })).toThrow(/^KL_REFRESH_ENV_ALLOW: /);
    }
  });
});

describe('KL_TOTAL_*', () => {
  it('defaults every bound across callers, and takes each from its variable', () => {
    expect(loadConfig({}).totalLimits).toEqual({
      query: 10,
      export: 8,
      subscription: 256,
      engine: 10,
      run: 16,
    });
    expect(
      loadConfig({
        KL_TOTAL_QUERIES: '1',
        KL_TOTAL_EXPORTS: '2',
        KL_TOTAL_SUBSCRIPTIONS: '3',
        KL_TOTAL_ENGINE_REQUESTS: '4',
        KL_TOTAL_RUN_REQUESTS: '100000',
      }).totalLimits,
    ).toEqual({ query: 1, export: 2, subscription: 3, engine: 4, run: 100_000 });
    expect(errorOf({ KL_TOTAL_EXPORTS: '0' }).message).toMatch(/^KL_TOTAL_EXPORTS: expected /);
  });
});

describe('KL_CALLER_*', () => {
  it('defaults every per-caller bound, and takes each from its variable', () => {
    expect(loadConfig({}).callerLimits).toEqual({
      query: 5,
      export: 4,
      subscription: 8,
      engine: 4,
      run: 8,
    });
    expect(
      loadConfig({
        KL_CALLER_QUERIES: '1',
        KL_CALLER_EXPORTS: '2',
        KL_CALLER_SUBSCRIPTIONS: '3',
        KL_CALLER_ENGINE_REQUESTS: '4',
        KL_CALLER_RUN_REQUESTS: '100000',
      }).callerLimits,
    ).toEqual({ query: 1, export: 2, subscription: 3, engine: 4, run: 100_000 });
  });

  it('stops the start on a bound that is not a whole number from 1, naming the variable', () => {
    for (const [name, bad] of [
      ['KL_CALLER_QUERIES', '0'],
      ['KL_CALLER_EXPORTS', 'many'],
      ['KL_CALLER_RUN_REQUESTS', '100001'],
    ]) {
      const error = errorOf({ [name]: bad });
      expect(error.message).toMatch(new RegExp(`^${name}: expected `));
      expect(error.code).toBe('CONFIG.INVALID');
    }
  });
});

describe('KL_CACHE_*', () => {
  it('defaults every budget', () => {
    expect(loadConfig({}).cache).toEqual({
      streams: 500,
      refreshRuns: 100,
      hashInstances: 100_000,
      documentInstances: 200_000,
      servedBytes: 256 * 1024 * 1024,
      heldEvents: 250_000,
    });
  });

  it('takes counts and a byte size', () => {
    expect(
      loadConfig({
        KL_CACHE_STREAMS: '50',
        KL_CACHE_REFRESH_RUNS: ' 7 ',
        KL_CACHE_HASH_INSTANCES: '1000',
        KL_CACHE_DOCUMENT_INSTANCES: '2000',
        KL_CACHE_SERVED_BYTES: '1GiB',
        KL_CACHE_HELD_EVENTS: '0',
      }).cache,
    ).toEqual({
      streams: 50,
      refreshRuns: 7,
      hashInstances: 1000,
      documentInstances: 2000,
      servedBytes: 1024 ** 3,
      heldEvents: 0,
    });
  });

  it('stops the start on a value out of range or not a number, naming the variable', () => {
    for (const [name, bad] of [
      ['KL_CACHE_STREAMS', '0'],
      ['KL_CACHE_STREAMS', '-5'],
      ['KL_CACHE_REFRESH_RUNS', '1e3'],
      ['KL_CACHE_HASH_INSTANCES', 'lots'],
      ['KL_CACHE_DOCUMENT_INSTANCES', '100000001'],
      ['KL_CACHE_SERVED_BYTES', '12 parsecs'],
      ['KL_CACHE_SERVED_BYTES', '10'],
      ['KL_CACHE_HELD_EVENTS', '-1'],
      ['KL_CACHE_HELD_EVENTS', 'all'],
    ]) {
      const error = errorOf({ [name]: bad });
      expect(error.message).toMatch(new RegExp(`^${name}: expected `));
      expect(error.code).toBe('CONFIG.INVALID');
    }
  });
});

describe('KL_AUTH and TLS', () => {
  it.each<[Record<string, string>, boolean]>([
    [{}, false],
    [{ KL_LISTEN: '[::1]:8080' }, false],
    [{ KL_LISTEN: 'localhost:8080' }, false],
    [{ KL_AUTH: 'on' }, true],
    [{ KL_LISTEN: '0.0.0.0:8080' }, true],
    [{ KL_LISTEN: '10.0.0.5:8080' }, true],
    [{ KL_LISTEN: 'kld.internal:80' }, true],
    [{ KL_LISTEN: '0.0.0.0:8080', KL_AUTH: 'off' }, false],
  ])('%j: authentication %s', (env, enabled) => {
    expect(loadConfig(env).auth.enabled).toBe(enabled);
  });

  const external = 'postgres://u:p@db:5432/kl';
  it.each<[Record<string, string>, boolean]>([
    [{}, true], // the embedded PostgreSQL: a single node of kld's own
    [{ KL_DATABASE_URL: external }, false], // standbys would have none of their rows
    [{ KL_DATABASE_URL: external, KL_UNLOGGED_READ_MODELS: 'on' }, true],
    [{ KL_UNLOGGED_READ_MODELS: 'OFF' }, false],
  ])('%j: unlogged read models %s', (env, unlogged) => {
    expect(loadConfig(env).unloggedReadModels).toBe(unlogged);
  });

  it('refuses an unknown KL_UNLOGGED_READ_MODELS', () => {
    expect(() => loadConfig({ KL_UNLOGGED_READ_MODELS: 'yes' })).toThrow(
      /KL_UNLOGGED_READ_MODELS: expected one of auto, on, off/,
    );
  });

  it('refuses an unknown KL_AUTH and half a TLS configuration', () => {
    expect(() => loadConfig({ KL_AUTH: 'maybe' })).toThrow(
      /KL_AUTH: expected one of auto, on, off/,
    );
    expect(() => loadConfig({ KL_TLS_CERT: 'c.pem' })).toThrow(/KL_TLS_KEY: set KL_TLS_CERT and/);
    expect(() => loadConfig({ KL_TLS_CLIENT_CA: 'ca.pem' })).toThrow(/KL_TLS_CLIENT_CA: needs/);
    expect(loadConfig({ KL_TLS_CERT: 'c.pem', KL_TLS_KEY: 'k.pem' }).tls).toMatchObject({
      clientCaFile: null,
    });
  });
});
