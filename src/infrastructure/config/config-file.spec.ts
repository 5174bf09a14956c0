import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ConfigError, loadConfig } from './config';
import {
  CONFIG_VARIABLES,
  describeConfig,
  effectiveEnvironment,
  readConfigFile,
} from './config-file';

describe('config file', () => {
  let dir: string;
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-config-'));
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = (name: string, text: string) => {
    const p = path.join(dir, name);
    fs.writeFileSync(p, text);
    return p;
  };

  it('takes the variables by their names, lists as comma-separated, numbers as text', () => {
    const p = file(
      'ok.yaml',
      [
        'KL_LISTEN: 0.0.0.0:9000',
        'KL_MAX_LOCK_BYTES: 2048',
        'KL_ALLOWED_ORIGINS: [https://a.example, https://b.example]',
        'KL_REFRESH_STATES:',
        '  - team/a',
        '  - team/b',
        'KL_REFRESH_EVERY: 15m',
        'KL_LOG_LEVEL: null',
      ].join('\n'),
    );
    expect(readConfigFile(p)).toEqual({
      KL_LISTEN: '0.0.0.0:9000',
      KL_MAX_LOCK_BYTES: '2048',
      KL_ALLOWED_ORIGINS: 'https://a.example,https://b.example',
      KL_REFRESH_STATES: 'team/a,team/b',
      KL_REFRESH_EVERY: '15m',
    });
    const config = loadConfig(effectiveEnvironment({}, p).env);
    expect(config).toMatchObject({
      listen: { host: '0.0.0.0', port: 9000 },
      maxLockBytes: 2048,
      allowedOrigins: ['https://a.example', 'https://b.example'],
      refreshStates: ['team/a', 'team/b'],
      refreshEvery: 15 * 60_000,
      logLevel: 'info',
    });
  });

  it('reads JSON too, and an empty file as no settings', () => {
    expect(readConfigFile(file('c.json', '{"KL_LOG_FORMAT": "json"}'))).toEqual({
      KL_LOG_FORMAT: 'json',
    });
    expect(readConfigFile(file('empty.yaml', '# nothing\n'))).toEqual({});
  });

  it('lets the environment override the file, even with an empty value', () => {
    const p = file('over.yaml', 'KL_LISTEN: 0.0.0.0:9000\nKL_DATABASE_URL: postgres://a@db/kl\n');
    const effective = effectiveEnvironment({ KL_LISTEN: ':7000', KL_DATABASE_URL: '' }, p);
    const config = loadConfig(effective.env);
    expect(config.listen).toEqual({ host: '127.0.0.1', port: 7000 });
    expect(config.databaseUrl).toBeNull();
    expect(effective.sourceOf('KL_LISTEN')).toBe('environment');
    expect(effective.sourceOf('KL_DATABASE_URL')).toBe('environment');
    expect(effective.sourceOf('KL_LOG_LEVEL')).toBe('default');
    // flags override both
    expect(loadConfig(effective.env, { listen: ':6000' }).listen.port).toBe(6000);
  });

  it('validates file values with the same one-line errors as the environment', () => {
    const p = file('bad-value.yaml', 'KL_MAX_STATE_BYTES: lots\n');
    const fromFile = () => loadConfig(effectiveEnvironment({}, p).env);
    const fromEnv = () => loadConfig({ KL_MAX_STATE_BYTES: 'lots' });
    expect(fromFile).toThrow(ConfigError);
    expect(fromFile).toThrow(new ConfigError(messageOf(fromEnv)));
  });

  it.each([
    [
      'an unknown name',
      'KL_LISTN: :8080\n',
      /line 1: unknown setting "KL_LISTN"; settings are named like/,
    ],
    ['not YAML', 'KL_LISTEN: [a\n', /: line \d: not valid YAML/],
    ['not a mapping', '- KL_LISTEN\n', /expected a mapping of KL_\* names to values/],
    ['a nested value', 'KL_LISTEN:\n  host: a\n', /line 1: KL_LISTEN: expected a string, a number/],
    ['a name twice', 'KL_LISTEN: :1\nKL_LISTEN: :2\n', /not valid YAML/],
  ])('refuses %s with one line naming the file', (_what, text, message) => {
    const p = file('bad.yaml', text);
    expect(() => readConfigFile(p)).toThrow(ConfigError);
    const m = messageOf(() => readConfigFile(p));
    expect(m).toMatch(message);
    expect(m.startsWith(p)).toBe(true);
    expect(m).not.toContain('\n');
  });

  it('takes authentication and TLS settings, checked as from the environment', () => {
    const ok = file(
      'auth.yaml',
      [
        'KL_LISTEN: 127.0.0.1:9000',
        'KL_AUTH: on',
        `KL_TLS_CERT: ${path.join(dir, 'server.crt')}`,
        `KL_TLS_KEY: ${path.join(dir, 'server.key')}`,
      ].join('\n'),
    );
    // YAML 1.2: a bare `on` is text, as in the environment.
    expect(readConfigFile(ok)).toMatchObject({ KL_AUTH: 'on' });
    expect(loadConfig(effectiveEnvironment({}, ok).env)).toMatchObject({
      auth: { mode: 'on', enabled: true },
      tls: { certFile: path.join(dir, 'server.crt'), keyFile: path.join(dir, 'server.key') },
    });
    const env = (text: string) => effectiveEnvironment({}, file('bad.yaml', text)).env;
    expect(messageOf(() => loadConfig(env('KL_AUTH: sometimes')))).toBe(
      'KL_AUTH: expected one of auto, on, off, got "sometimes"',
    );
    expect(messageOf(() => loadConfig(env('KL_TLS_CERT: /x.crt')))).toMatch(/KL_TLS_KEY/);
  });

  it('says when the file is missing', () => {
    expect(() => readConfigFile(path.join(dir, 'none.yaml'))).toThrow(
      /--config .*none\.yaml: no such file/,
    );
  });

  it('describes every variable with its source, passwords masked', () => {
    const p = file('show.yaml', 'KL_DATABASE_URL: postgres://kl:s3cret@db:5432/kl\n');
    const text = describeConfig(
      effectiveEnvironment({ KL_LOG_LEVEL: 'debug', UNRELATED: 'x' }, p),
      p,
    );
    expect(text).not.toContain('s3cret');
    expect(text).toContain(`KL_DATABASE_URL: "postgres://kl:***@db:5432/kl" # ${p}`);
    expect(text).toContain('KL_LOG_LEVEL: "debug" # environment');
    expect(text).toContain('KL_LISTEN: "127.0.0.1:8080" # default');
    expect(text).not.toContain('UNRELATED');
    const names = text
      .split('\n')
      .filter((l) => /^KL_/.test(l))
      .map((l) => l.split(':')[0]);
    expect(names).toEqual(Object.keys(CONFIG_VARIABLES));
  });
});

function messageOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('did not throw');
}
