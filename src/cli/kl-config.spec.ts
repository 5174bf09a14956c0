import { Command } from 'commander';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { backendAddress, loadKlConfig, resolveKlConfig, withoutCredentials } from './kl-config';

const BACKEND = {
  'backend.tf': `# the state
terraform {
  backend "http" {
    address = "http://kld.local:8080/v1/states/team/from-backend"
  }
}`,
};
const TOML = {
  path: '.kl.toml',
  text: 'state_url = "http://kld.local/v1/states/from-toml"\nprotocol = "http"\n[auth]\ntoken_env = "TEAM_TOKEN"\n',
};

describe('resolveKlConfig precedence: flags > env > .kl.toml > backend "http"', () => {
  it('takes the backend block when nothing else is given', () => {
    const c = resolveKlConfig({ flags: {}, env: {}, terraformFiles: () => BACKEND });
    expect(c.stateUrl).toEqual({
      value: 'http://kld.local:8080/v1/states/team/from-backend',
      source: 'backend "http"',
      from: 'backend.tf',
    });
    expect([c.server, c.state]).toEqual(['http://kld.local:8080', 'team/from-backend']);
    expect(c.protocol).toEqual({ value: 'auto', source: 'default' });
    expect(c.token).toEqual({ value: null, source: 'unset' });
  });

  it('.kl.toml over the backend block; its token from the variable it names', () => {
    const c = resolveKlConfig({
      flags: {},
      env: { TEAM_TOKEN: 't-toml' },
      toml: TOML,
      terraformFiles: () => BACKEND,
    });
    expect([c.stateUrl.source, c.state]).toEqual(['.kl.toml', 'from-toml']);
    expect([c.protocol.value, c.protocol.source]).toEqual(['http', '.kl.toml']);
    expect([c.token.value, c.token.source]).toEqual(['t-toml', '.kl.toml']);
  });

  it('env over .kl.toml', () => {
    const c = resolveKlConfig({
      flags: {},
      env: {
        TEAM_TOKEN: 't-toml',
        KL_TOKEN: 't-env',
        KL_STATE_URL: 'https://kld.example/base/v1/states/from-env',
        KL_PROTOCOL: 'state-engine',
      },
      toml: TOML,
      terraformFiles: () => BACKEND,
    });
    expect([c.stateUrl.source, c.server, c.state]).toEqual([
      'env',
      'https://kld.example/base',
      'from-env',
    ]);
    expect([c.protocol.value, c.protocol.source]).toEqual(['state-engine', 'env']);
    expect([c.token.value, c.token.source]).toEqual(['t-env', 'env']);
  });

  it('reads the terraform files only when nothing before the backend block names the state', () => {
    let reads = 0;
    const terraformFiles = () => {
      reads++;
      return BACKEND;
    };
    resolveKlConfig({ flags: { stateUrl: 'http://x/v1/states/a' }, env: {}, terraformFiles });
    resolveKlConfig({ flags: {}, env: { KL_STATE_URL: 'http://x/v1/states/a' }, terraformFiles });
    resolveKlConfig({ flags: {}, env: { TEAM_TOKEN: 't' }, toml: TOML, terraformFiles });
    expect(reads).toBe(0);
    const c = resolveKlConfig({ flags: { protocol: 'http' }, env: {}, terraformFiles });
    expect([reads, c.state]).toEqual([1, 'team/from-backend']);
  });

  it('flags over everything', () => {
    const c = resolveKlConfig({
      flags: {
        stateUrl: 'http://127.0.0.1:1/v1/states/from-flag',
        protocol: 'auto',
        token: 't-flag',
      },
      env: {
        KL_TOKEN: 't-env',
        KL_STATE_URL: 'http://x/v1/states/from-env',
        KL_PROTOCOL: 'http',
      },
      toml: TOML,
      terraformFiles: () => BACKEND,
    });
    expect([c.stateUrl.source, c.state]).toEqual(['flag', 'from-flag']);
    expect([c.protocol.value, c.protocol.source]).toEqual(['auto', 'flag']);
    expect([c.token.value, c.token.source]).toEqual(['t-flag', 'flag']);
  });

  it('refuses what it cannot use, in one line naming where it came from', () => {
    expect(() => resolveKlConfig({ flags: { protocol: 'kl' }, env: {} })).toThrow(
      '--protocol: protocol must be one of http, state-engine, auto, got "kl"',
    );
    expect(() => resolveKlConfig({ flags: {}, env: { KL_STATE_URL: 'http://x/nope' } })).toThrow(
      /KL_STATE_URL: state_url must look like/,
    );
    expect(() => resolveKlConfig({ flags: {}, env: {}, toml: TOML })).toThrow(
      '.kl.toml: auth.token_env names TEAM_TOKEN, which is not set',
    );
    expect(() =>
      resolveKlConfig({ flags: {}, env: {}, toml: { path: '.kl.toml', text: 'statee_url = "x"' } }),
    ).toThrow(/unknown key statee_url/);
    expect(() =>
      resolveKlConfig({ flags: {}, env: {}, toml: { path: '.kl.toml', text: 'state_url = ' } }),
    ).toThrow(/not valid TOML/);
  });

  it('names a bad state_url without the password it carries, and a bad %-escape in one line', () => {
    const bad = (url: string) => () => resolveKlConfig({ flags: {}, env: { KL_STATE_URL: url } });
    expect(bad('http://ops:S3cret@[bad/v1/states/x')).toThrow(
      'KL_STATE_URL: state_url is not a URL: "http://ops:***@[bad/v1/states/x"',
    );
    expect(bad('http://kld.local/v1/states/a%zz')).toThrow(
      'KL_STATE_URL: the state name in state_url is not valid percent-encoding',
    );
  });
});

describe('backendAddress', () => {
  it('ignores commented-out blocks and other backends', () => {
    expect(
      backendAddress({
        'a.tf':
          '# backend "http" {\n#  address = "http://old/v1/states/x"\n# }\nterraform { backend "s3" {} }',
      }),
    ).toBeNull();
    expect(backendAddress(BACKEND)?.address).toBe(
      'http://kld.local:8080/v1/states/team/from-backend',
    );
  });
});

describe('withoutCredentials', () => {
  it('drops a user and password from a URL and leaves every other URL as given', () => {
    expect(withoutCredentials('https://ci:kl_s3cret@kld.example.com:8443/base')).toBe(
      'https://kld.example.com:8443/base',
    );
    expect(withoutCredentials('http://ci@127.0.0.1:8080')).toBe('http://127.0.0.1:8080');
    for (const url of ['http://127.0.0.1:8080', 'https://kld/v1/states/a@b', 'https://kld?x=a@b']) {
      expect(withoutCredentials(url)).toBe(url);
    }
  });
});

describe('loadKlConfig: a .kl.toml that is not a small file', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-toml-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));
  const load = () => loadKlConfig(new Command(), dir);

  it('is refused in one line naming it, never passed over or read whole', () => {
    const toml = path.join(dir, '.kl.toml');
    fs.symlinkSync('.kl.toml', toml); // a link to itself
    expect(load).toThrow(/^\.kl\.toml: a loop of symbolic links$/);
    fs.rmSync(toml);
    fs.symlinkSync('elsewhere.toml', toml);
    expect(load).toThrow(/^\.kl\.toml: a symbolic link to no file$/);
    fs.rmSync(toml);
    fs.mkdirSync(toml);
    expect(load).toThrow(/^\.kl\.toml: a directory, not a file$/);
    fs.rmdirSync(toml);
    fs.writeFileSync(toml, '');
    fs.truncateSync(toml, 600 * 2 ** 20);
    expect(load).toThrow(/^\.kl\.toml: larger than 1048576 bytes/);
    fs.writeFileSync(
      toml,
      `protocol = "http"\nstate_url = [${'['.repeat(5000)}${']'.repeat(5000)}]\n`,
    );
    expect(load).toThrow(/^\.kl\.toml: not valid TOML/);
  });

  it('is absent when nothing is there', () => {
    expect(load().stateUrl.source).toBe('unset');
  });
});
