import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { lastError } from '../../application/apply/terraform-output';
import {
  ApplyResult,
  TERRAFORM_FAILED,
  TerraformWorkspace,
  TerraformWorkspaces,
  WorkspaceContents,
} from '../../application/apply/terraform-workspace.port';
import { DomainError } from '../../domain/shared/domain-error';
import { stringifyJson } from '../../domain/terraform/lossless-json';
import { runTerraform, TerraformRun } from './terraform-cli';

const PLAN_FILE = 'kl.tfplan';
const STATE_FILE = 'terraform.tfstate';
/** Sorted after any user `*.auto.tfvars*`, so the planned values win. */
const PINNED_VARIABLES = 'zz-kl-plan.auto.tfvars.json';
const SKIPPED = new Set(['.terraform', '.git', 'node_modules']);

interface ModuleManifest {
  Modules?: { Key?: string; Dir?: string }[];
}

async function exists(p: string): Promise<boolean> {
  return fs.stat(p).then(
    () => true,
    () => false,
  );
}

/** Directories of local modules that live outside the configuration directory. */
async function outsideModuleDirs(configDir: string): Promise<string[]> {
  let manifest: ModuleManifest;
  try {
    manifest = JSON.parse(
      await fs.readFile(path.join(configDir, '.terraform', 'modules', 'modules.json'), 'utf8'),
    ) as ModuleManifest;
  } catch {
    return [];
  }
  const dirs = new Set<string>();
  for (const m of manifest.Modules ?? []) {
    if (!m.Dir || m.Dir.startsWith('.terraform')) continue;
    const abs = path.resolve(configDir, m.Dir);
    const rel = path.relative(configDir, abs);
    if (rel.startsWith('..')) dirs.add(abs);
  }
  return [...dirs];
}

function commonAncestor(dirs: string[]): string {
  let common = dirs[0];
  for (const d of dirs.slice(1)) {
    while (path.relative(common, d).startsWith('..')) common = path.dirname(common);
  }
  return common;
}

/**
 * kl's private terraform directory: the user's configuration copied (local
 * modules outside it keep their relative place), the root module's files
 * replaced by the ones kl prepared, a local backend whose state is the
 * slice. Providers come from the user's `.terraform/providers` (what their
 * own `terraform init` installed) when there is one, else from terraform's
 * usual sources (CLI configuration, TF_PLUGIN_CACHE_DIR).
 *
 * When the user's directory is initialised, kl reuses that instead of
 * running `terraform init` (a process, and with a real provider a hash of
 * its whole binary): their lock file is already copied, their modules'
 * manifest too, and their installed providers are linked. Terraform itself
 * checks all of it at plan (the lock file against the configuration, each
 * provider against the lock file's checksums, the manifest against every
 * module call), so a plan that succeeds is the plan a fresh init would give;
 * a plan that fails is run again after a fresh `terraform init`.
 */
export class TempWorkspaces implements TerraformWorkspaces {
  async open(
    configDir: string,
    contents: WorkspaceContents | Promise<WorkspaceContents>,
  ): Promise<TerraformWorkspace> {
    // Settled here at once: a failure while the tree is being copied is not left unhandled.
    const ready = Promise.resolve(contents).then(
      (spec) => ({ spec }),
      (error: unknown) => ({ error }),
    );
    const base = await fs.mkdtemp(path.join(os.tmpdir(), 'kl-apply-'));
    try {
      configDir = path.resolve(configDir);
      const outside = await outsideModuleDirs(configDir);
      const top = outside.length > 0 ? commonAncestor([configDir, ...outside]) : configDir;
      const dir = path.join(base, 'tree', path.relative(top, configDir));
      await copyTree(configDir, dir, true);
      for (const m of outside)
        await copyTree(m, path.join(base, 'tree', path.relative(top, m)), false);
      const userModules = path.join(configDir, '.terraform', 'modules');
      if (await exists(userModules)) {
        await fs.cp(userModules, path.join(dir, '.terraform', 'modules'), { recursive: true });
      }
      const settled = await ready;
      if ('error' in settled) throw settled.error;
      const { spec } = settled;
      for (const f of spec.rootFiles) await fs.writeFile(path.join(dir, f.name), f.text);
      await fs.writeFile(path.join(dir, STATE_FILE), stringifyJson(spec.state, 2) + '\n');
      if (spec.variables && Object.keys(spec.variables).length > 0) {
        await fs.writeFile(
          path.join(dir, PINNED_VARIABLES),
          stringifyJson(spec.variables, 2) + '\n',
        );
      }
      const providers = path.join(configDir, '.terraform', 'providers');
      const hasProviders = await exists(providers);
      const pluginDir = !process.env.TF_PLUGIN_CACHE_DIR && hasProviders ? providers : null;
      const initialised = await exists(path.join(configDir, '.terraform'));
      if (initialised && hasProviders) {
        await fs.mkdir(path.join(dir, '.terraform'), { recursive: true });
        await fs.symlink(providers, path.join(dir, '.terraform', 'providers'), 'dir');
      }
      return new TempWorkspace(base, dir, pluginDir, initialised);
    } catch (e) {
      await fs.rm(base, { recursive: true, force: true });
      throw e;
    }
  }
}

/** Copies a directory; at the root module, its configuration files and local state stay behind. */
async function copyTree(from: string, to: string, rootModule: boolean): Promise<void> {
  await fs.cp(from, to, {
    recursive: true,
    verbatimSymlinks: true,
    filter: (src) => {
      const rel = path.relative(from, src);
      if (rel === '') return true;
      const parts = rel.split(path.sep);
      if (parts.some((p) => SKIPPED.has(p))) return false;
      if (parts.length === 1 && rootModule) {
        const name = parts[0];
        if (name.endsWith('.tf') || name.endsWith('.tf.json')) return false;
        if (name.startsWith('terraform.tfstate') || name.endsWith('.tfplan')) return false;
      }
      return true;
    },
  });
}

class TempWorkspace implements TerraformWorkspace {
  /** init() found the user's initialisation reusable: the next plan tries it first. */
  private reusing = false;

  constructor(
    private readonly base: string,
    readonly dir: string,
    private readonly pluginDir: string | null,
    private readonly reusable: boolean,
  ) {}

  private async run(
    command: string,
    args: string[],
    signal?: AbortSignal,
    onLine?: (line: string) => void,
  ): Promise<TerraformRun> {
    const run = await runTerraform([command, ...args], { cwd: this.dir, signal, onLine });
    if (run.interrupted) {
      throw new DomainError('APPLY.INTERRUPTED', `terraform ${command} was interrupted`);
    }
    if (run.code !== 0) {
      throw new DomainError(
        TERRAFORM_FAILED,
        `terraform ${command} failed in kl's directory: ${lastError(run.output)}`,
        { output: run.output },
      );
    }
    return run;
  }

  async init(signal?: AbortSignal): Promise<void> {
    if (this.reusable) {
      this.reusing = true;
      return;
    }
    await this.freshInit(signal);
  }

  private async freshInit(signal?: AbortSignal): Promise<void> {
    this.reusing = false;
    // The linked providers are the user's: init must install into a directory of its own.
    await fs.rm(path.join(this.dir, '.terraform', 'providers'), { force: true });
    const args = ['-input=false', '-no-color'];
    if (this.pluginDir) args.push(`-plugin-dir=${this.pluginDir}`);
    await this.run('init', args, signal);
  }

  async plan(
    options: { targets: string[]; refresh: boolean },
    signal?: AbortSignal,
  ): Promise<unknown> {
    const args = ['-input=false', '-no-color', '-lock=false', `-out=${PLAN_FILE}`];
    if (!options.refresh) args.push('-refresh=false');
    for (const t of options.targets) args.push(`-target=${t}`);
    try {
      await this.run('plan', args, signal);
    } catch (e) {
      // Whatever terraform found wrong with the reused initialisation, a fresh init decides.
      if (!this.reusing || !(e instanceof DomainError) || e.code !== TERRAFORM_FAILED) throw e;
      await this.freshInit(signal);
      await this.run('plan', args, signal);
    }
    const shown = await this.run('show', ['-json', '-no-color', PLAN_FILE], signal);
    try {
      return JSON.parse(shown.stdout) as unknown;
    } catch {
      throw new DomainError(
        TERRAFORM_FAILED,
        'terraform show -json printed something that is not JSON',
      );
    }
  }

  async apply(signal?: AbortSignal, onOutput?: (line: string) => void): Promise<ApplyResult> {
    const run = await runTerraform(
      ['apply', '-input=false', '-no-color', '-lock=false', '-auto-approve', PLAN_FILE],
      { cwd: this.dir, signal, onLine: onOutput },
    );
    if (run.code === 0 && !run.interrupted) return { ok: true, output: run.output };
    return {
      ok: false,
      interrupted: run.interrupted,
      command: 'terraform apply',
      code: run.code,
      output: run.output,
    };
  }

  async stateText(): Promise<string | null> {
    try {
      const text = await fs.readFile(path.join(this.dir, STATE_FILE), 'utf8');
      return text.trim() === '' ? null : text;
    } catch {
      return null;
    }
  }

  async moduleDirs(): Promise<Map<string, string>> {
    const dirs = new Map<string, string>([['', this.dir]]);
    try {
      const manifest = JSON.parse(
        await fs.readFile(path.join(this.dir, '.terraform', 'modules', 'modules.json'), 'utf8'),
      ) as ModuleManifest;
      for (const m of manifest.Modules ?? []) {
        if (typeof m.Key === 'string' && typeof m.Dir === 'string') {
          dirs.set(m.Key, path.resolve(this.dir, m.Dir));
        }
      }
    } catch {
      // no modules
    }
    return dirs;
  }

  async dispose(): Promise<void> {
    await fs.rm(this.base, { recursive: true, force: true });
  }
}
