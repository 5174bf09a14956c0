import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { currentPlatform, discoverProvider, providerSearchPaths } from './discovery';
import { normaliseProviderSource } from './provider-address';
import { ProviderError } from './provider-error';
import { compareSemver, parseSemver } from './semver';

const platform = 'linux_amd64';
let root: string;

function fakeProvider(
  base: string,
  version: string,
  name = `terraform-provider-aws_v${version}_x5`,
  mode = 0o755,
): string {
  const dir = path.join(base, 'registry.terraform.io', 'hashicorp', 'aws', version, platform);
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, name);
  fs.writeFileSync(file, '#!/bin/sh\nexit 0\n', { mode });
  return file;
}

function dirs(): Record<'flag' | 'env' | 'home' | 'cwd' | 'cache', string> {
  const names = ['flag', 'env', 'home', 'cwd', 'cache'] as const;
  return Object.fromEntries(
    names.map((n) => [n, fs.mkdtempSync(path.join(root, `${n}-`))]),
  ) as Record<(typeof names)[number], string>;
}

function errorOf(fn: () => unknown): ProviderError {
  try {
    fn();
  } catch (e) {
    if (e instanceof ProviderError) return e;
    throw e;
  }
  throw new Error('expected a ProviderError');
}

beforeEach(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'kl-discovery-'));
});
afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

describe('provider discovery', () => {
  it('orders search paths: argument, KL_PROVIDER_PATH, plugin-cache, .terraform/providers, TF_PLUGIN_CACHE_DIR', () => {
    const d = dirs();
    const paths = providerSearchPaths({
      searchPaths: [d.flag],
      env: { KL_PROVIDER_PATH: `${d.env}:${d.env}-2`, TF_PLUGIN_CACHE_DIR: d.cache },
      homeDir: d.home,
      cwd: d.cwd,
    });
    expect(paths).toEqual([
      d.flag,
      d.env,
      `${d.env}-2`,
      path.join(d.home, '.terraform.d', 'plugin-cache'),
      path.join(d.cwd, '.terraform', 'providers'),
      d.cache,
    ]);
  });

  it('takes the first search path in precedence order that holds the provider', () => {
    const d = dirs();
    const homeCache = path.join(d.home, '.terraform.d', 'plugin-cache');
    const cwdProviders = path.join(d.cwd, '.terraform', 'providers');
    const binaries = {
      flag: fakeProvider(d.flag, '5.1.0'),
      env: fakeProvider(d.env, '5.2.0'),
      home: fakeProvider(homeCache, '5.3.0'),
      cwd: fakeProvider(cwdProviders, '5.4.0'),
      cache: fakeProvider(d.cache, '5.5.0'),
    };
    const base = {
      env: { KL_PROVIDER_PATH: d.env, TF_PLUGIN_CACHE_DIR: d.cache },
      homeDir: d.home,
      cwd: d.cwd,
      platform,
    };
    expect(discoverProvider('hashicorp/aws', { ...base, searchPaths: [d.flag] }).binary).toBe(
      binaries.flag,
    );
    expect(discoverProvider('hashicorp/aws', base).binary).toBe(binaries.env);
    expect(
      discoverProvider('hashicorp/aws', { ...base, env: { TF_PLUGIN_CACHE_DIR: d.cache } }).binary,
    ).toBe(binaries.home);
    fs.rmSync(homeCache, { recursive: true });
    expect(
      discoverProvider('hashicorp/aws', { ...base, env: { TF_PLUGIN_CACHE_DIR: d.cache } }).binary,
    ).toBe(binaries.cwd);
    fs.rmSync(cwdProviders, { recursive: true });
    const last = discoverProvider('hashicorp/aws', {
      ...base,
      env: { TF_PLUGIN_CACHE_DIR: d.cache },
    });
    expect(last).toEqual({
      source: 'registry.terraform.io/hashicorp/aws',
      version: '5.5.0',
      binary: binaries.cache,
      searchPath: d.cache,
      versionFrom: 'highest',
    });
  });

  it('picks the highest release when nothing pins one, pre-releases only when pinned', () => {
    const d = dirs();
    fakeProvider(d.flag, '5.9.0');
    const want = fakeProvider(d.flag, '5.10.0');
    fakeProvider(d.flag, '5.11.0-beta1');
    fs.mkdirSync(
      path.join(d.flag, 'registry.terraform.io', 'hashicorp', 'aws', 'not-a-version', platform),
      {
        recursive: true,
      },
    );
    const found = discoverProvider('aws', {
      searchPaths: [d.flag],
      env: {},
      homeDir: d.home,
      cwd: d.cwd,
      platform,
    });
    expect([found.version, found.binary]).toEqual(['5.10.0', want]);
    const beta = discoverProvider('aws', {
      searchPaths: [d.flag],
      env: {},
      homeDir: d.home,
      cwd: d.cwd,
      platform,
      version: '5.11.0-beta1',
    });
    expect(beta.version).toBe('5.11.0-beta1');
  });

  it('honours the version pinned in .terraform.lock.hcl, then an explicit version', () => {
    const d = dirs();
    fakeProvider(d.flag, '5.100.0');
    const pinned = fakeProvider(d.flag, '5.99.0');
    const explicit = fakeProvider(d.env, '4.0.0');
    fs.writeFileSync(
      path.join(d.cwd, '.terraform.lock.hcl'),
      'provider "registry.terraform.io/hashicorp/aws" {\n  version = "5.99.0"\n}\n',
    );
    const opts = { searchPaths: [d.flag, d.env], env: {}, homeDir: d.home, cwd: d.cwd, platform };
    expect(discoverProvider('registry.terraform.io/hashicorp/aws', opts)).toMatchObject({
      binary: pinned,
      versionFrom: 'lock-file',
    });
    expect(discoverProvider('hashicorp/aws', { ...opts, version: '4.0.0' })).toMatchObject({
      binary: explicit,
      versionFrom: 'argument',
    });
    expect(discoverProvider('hashicorp/aws', { ...opts, lockFile: null }).version).toBe('5.100.0');
  });

  it('ignores non-executables, other platforms and look-alike names', () => {
    const d = dirs();
    fakeProvider(d.flag, '5.0.0', 'terraform-provider-aws_v5.0.0_x5', 0o644);
    fakeProvider(d.flag, '5.1.0', 'terraform-provider-awscc_v5.1.0');
    fakeProvider(d.flag, '5.2.0', 'README.md');
    const opts = { searchPaths: [d.flag], env: {}, homeDir: d.home, cwd: d.cwd };
    expect(errorOf(() => discoverProvider('hashicorp/aws', { ...opts, platform })).code).toBe(
      'PROVIDER.NOT_FOUND',
    );
    const good = fakeProvider(d.flag, '5.3.0', 'terraform-provider-aws');
    expect(discoverProvider('hashicorp/aws', { ...opts, platform }).binary).toBe(good);
    expect(
      errorOf(() => discoverProvider('hashicorp/aws', { ...opts, platform: 'darwin_arm64' })).code,
    ).toBe('PROVIDER.NOT_FOUND');
  });

  it('lists every path it searched when the provider is missing', () => {
    const d = dirs();
    fakeProvider(d.flag, '5.1.0');
    fs.writeFileSync(
      path.join(d.cwd, '.terraform.lock.hcl'),
      'provider "registry.terraform.io/hashicorp/aws" {\n  version = "5.100.0"\n}\n',
    );
    const err = errorOf(() =>
      discoverProvider('hashicorp/aws', {
        searchPaths: [d.flag],
        env: { KL_PROVIDER_PATH: d.env, TF_PLUGIN_CACHE_DIR: d.cache },
        homeDir: d.home,
        cwd: d.cwd,
        platform,
      }),
    );
    expect(err.code).toBe('PROVIDER.NOT_FOUND');
    const tail = path.join('registry.terraform.io', 'hashicorp', 'aws', '5.100.0', platform);
    for (const p of [
      d.flag,
      d.env,
      path.join(d.home, '.terraform.d', 'plugin-cache'),
      d.cwd,
      d.cache,
    ]) {
      expect(err.message).toContain(
        path.join(p, p === d.cwd ? path.join('.terraform', 'providers') : '', tail),
      );
    }
    expect(err.message).toContain('pinned by the lock file');
    expect(err.metadata.searched).toHaveLength(5);
  });

  it('names this machine like Terraform does', () => {
    expect(currentPlatform()).toMatch(
      /^(linux|darwin|windows|freebsd|openbsd)_(amd64|arm64|386|arm|\w+)$/,
    );
  });
});

describe('provider source addresses', () => {
  it.each([
    ['aws', 'registry.terraform.io/hashicorp/aws'],
    ['hashicorp/aws', 'registry.terraform.io/hashicorp/aws'],
    ['HashiCorp/AWS', 'registry.terraform.io/hashicorp/aws'],
    ['registry.terraform.io/hashicorp/aws', 'registry.terraform.io/hashicorp/aws'],
    ['registry.opentofu.org/hashicorp/aws', 'registry.opentofu.org/hashicorp/aws'],
    ['provider["registry.terraform.io/hashicorp/aws"]', 'registry.terraform.io/hashicorp/aws'],
    ['provider["registry.terraform.io/hashicorp/aws"].east', 'registry.terraform.io/hashicorp/aws'],
  ])('%s → %s', (input, want) => expect(normaliseProviderSource(input)).toBe(want));

  it('refuses malformed addresses', () => {
    for (const bad of ['', 'a/b/c/d', 'has space/aws', '../aws']) {
      expect(errorOf(() => normaliseProviderSource(bad)).code).toBe('PROVIDER.INVALID_SOURCE');
    }
  });
});

describe('semantic versions', () => {
  it('orders by precedence, releases after their pre-releases', () => {
    const sorted = [
      '5.10.0',
      '5.9.0',
      '5.10.0-rc.1',
      '5.10.0-beta.2',
      '5.10.0-beta.11',
      '4.67.0',
      'v6.0.0',
    ]
      .map((v) => ({ v, s: parseSemver(v)! }))
      .sort((a, b) => compareSemver(a.s, b.s))
      .map((x) => x.v);
    expect(sorted).toEqual([
      '4.67.0',
      '5.9.0',
      '5.10.0-beta.2',
      '5.10.0-beta.11',
      '5.10.0-rc.1',
      '5.10.0',
      'v6.0.0',
    ]);
    expect(parseSemver('5.1')).toBeNull();
  });
});
