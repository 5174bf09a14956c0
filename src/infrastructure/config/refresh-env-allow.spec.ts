import { ConfigError, loadConfig } from './config';

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
