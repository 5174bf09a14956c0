import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseLockFile } from './lock-file';
import { formatProviderSource, parseProviderSource } from './provider-address';
import { ProviderError } from './provider-error';
import { compareSemver, parseSemver } from './semver';

export interface DiscoveryOptions {
  /** `--provider-search-path`, searched first, in order. */
  searchPaths?: readonly string[];
  /** An exact version; otherwise the lock file's pin, otherwise the highest found. */
  version?: string;
  /** Defaults to `<cwd>/.terraform.lock.hcl` when that file exists; null disables it. */
  lockFile?: string | null;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  homeDir?: string;
  /** `<os>_<arch>` as Terraform names it; defaults to this machine's. */
  platform?: string;
}

export interface DiscoveredProvider {
  source: string;
  version: string;
  binary: string;
  /** The search path it was found under. */
  searchPath: string;
  /** Where the version came from. */
  versionFrom: 'argument' | 'lock-file' | 'highest';
}

/**
 * The search paths in precedence order: `--provider-search-path`, then
 * `KL_PROVIDER_PATH` (colon-separated), then Terraform's own places.
 */
export function providerSearchPaths(options: DiscoveryOptions = {}): string[] {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const home = options.homeDir ?? os.homedir();
  const paths = [
    ...(options.searchPaths ?? []),
    ...(env.KL_PROVIDER_PATH ?? '').split(path.delimiter),
    path.join(home, '.terraform.d', 'plugin-cache'),
    path.join(cwd, '.terraform', 'providers'),
    env.TF_PLUGIN_CACHE_DIR ?? '',
  ];
  const resolved = paths.filter((p) => p.trim() !== '').map((p) => path.resolve(cwd, p));
  return [...new Set(resolved)];
}

export function currentPlatform(): string {
  const osName = process.platform === 'win32' ? 'windows' : process.platform;
  const arch: Record<string, string> = { x64: 'amd64', ia32: '386', arm64: 'arm64', arm: 'arm' };
  return `${osName}_${arch[process.arch] ?? process.arch}`;
}

/**
 * Finds `<path>/<host>/<namespace>/<type>/<version>/<os>_<arch>/terraform-provider-<type>*`.
 * The first search path (in precedence order) holding the wanted version wins;
 * without a pin, the first path holding any release gives its highest.
 */
export function discoverProvider(
  source: string,
  options: DiscoveryOptions = {},
): DiscoveredProvider {
  const address = parseProviderSource(source);
  const normalised = formatProviderSource(address);
  const cwd = options.cwd ?? process.cwd();
  const platform = options.platform ?? currentPlatform();

  let pinned = options.version;
  let versionFrom: DiscoveredProvider['versionFrom'] = pinned ? 'argument' : 'highest';
  if (!pinned) {
    const lockPath =
      options.lockFile === undefined ? path.join(cwd, '.terraform.lock.hcl') : options.lockFile;
    if (lockPath && fs.existsSync(lockPath)) {
      const locked = parseLockFile(fs.readFileSync(lockPath, 'utf8')).get(normalised);
      if (locked) {
        pinned = locked.version;
        versionFrom = 'lock-file';
      }
    }
  }

  const searched: string[] = [];
  for (const root of providerSearchPaths(options)) {
    const typeDir = path.join(root, address.hostname, address.namespace, address.type);
    searched.push(path.join(typeDir, pinned ?? '<version>', platform));
    const versions = listDirs(typeDir)
      .map((v) => ({ text: v, semver: parseSemver(v) }))
      // As in Terraform, a pre-release is only ever chosen by an exact pin.
      .filter(
        (v) => v.semver !== null && (pinned ? v.text === pinned : v.semver.prerelease.length === 0),
      )
      .sort((a, b) => compareSemver(b.semver!, a.semver!));
    for (const v of versions) {
      const binary = findBinary(path.join(typeDir, v.text, platform), address.type);
      if (binary)
        return { source: normalised, version: v.text, binary, searchPath: root, versionFrom };
    }
  }
  const what = pinned
    ? `${normalised} ${pinned} (${versionFrom === 'lock-file' ? 'pinned by the lock file' : 'requested'})`
    : normalised;
  throw new ProviderError(
    'PROVIDER.NOT_FOUND',
    `provider ${what} for ${platform} not found; searched ${searched.join(', ')}`,
    { source: normalised, version: pinned ?? null, platform, searched },
  );
}

function listDirs(dir: string): string[] {
  try {
    return fs
      .readdirSync(dir, { withFileTypes: true })
      .filter((d) => d.isDirectory() || (d.isSymbolicLink() && isDir(path.join(dir, d.name))))
      .map((d) => d.name);
  } catch {
    return [];
  }
}

function isDir(p: string): boolean {
  try {
    return fs.statSync(p).isDirectory();
  } catch {
    return false;
  }
}

function findBinary(dir: string, type: string): string | null {
  let names: string[];
  try {
    names = fs.readdirSync(dir).sort();
  } catch {
    return null;
  }
  // `terraform-provider-aws_v5.100.0_x5`, but not `terraform-provider-awscc`.
  const pattern = new RegExp(`^terraform-provider-${type.replace(/[.]/g, '\\.')}(?:_.*|\\.exe)?$`);
  for (const name of names) {
    if (!pattern.test(name)) continue;
    const full = path.join(dir, name);
    try {
      if (!fs.statSync(full).isFile()) continue;
      fs.accessSync(full, fs.constants.X_OK);
      return full;
    } catch {
      // not an executable file
    }
  }
  return null;
}
