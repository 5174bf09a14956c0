import * as fsSync from 'node:fs';
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
import { CliConfigPipe, cliConfigText } from './cli-config-pipe';
import { makeNamedPipes } from './named-pipes';
import { StatePipe } from './state-pipe';
import { runTerraform, terraformEnv, TerraformRun } from './terraform-cli';

const PLAN_FILE = 'kl.tfplan';
const SHOW_ARGS = ['-json', '-no-color', PLAN_FILE];
const STATE_FILE = 'terraform.tfstate';
/** Where the state's pipe is laid while the configuration is copied. */
const STATE_PIPE = 'state.pipe';
/** The CLI configuration of the `terraform show` started beside `terraform plan`. */
const SHOW_CONFIG_PIPE = 'show.tfrc';
/** Sorted after any user `*.auto.tfvars*`, so the planned values win. */
const PINNED_VARIABLES = 'zz-kl-plan.auto.tfvars.json';
const SKIPPED = new Set(['.terraform', '.git', 'node_modules']);

interface ModuleManifest {
  Modules?: { Key?: string; Dir?: string }[];
}

/** A terraform plan fed through a pipe, and the show started beside it, if it can be. */
interface EarlyPipes {
  state: StatePipe;
  show: { pipe: CliConfigPipe; config: string } | null;
}

/**
 * The pipes of a plan started before its state arrives: the state's, and
 * the CLI configuration's of a `terraform show` started with the plan
 * (when the user's CLI configuration is one file kl can hand on, which is
 * read while `mkfifo`, one for both pipes, runs).
 */
async function layPipes(base: string): Promise<EarlyPipes | null> {
  const [state, show] = [path.join(base, STATE_PIPE), path.join(base, SHOW_CONFIG_PIPE)];
  const made = makeNamedPipes([state, show]);
  const config = cliConfigText(terraformEnv());
  if (!(await made)) return null;
  const statePipe = StatePipe.open(state);
  if (statePipe === null) return null;
  const showPipe = config === null ? null : CliConfigPipe.open(show);
  return { state: statePipe, show: showPipe && { pipe: showPipe, config: config! } };
}

function closePipes(pipes: EarlyPipes | null): void {
  pipes?.state.close();
  pipes?.show?.pipe.close();
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
    configDir = path.resolve(configDir);
    const initialised = exists(path.join(configDir, '.terraform'));
    const providers = path.join(configDir, '.terraform', 'providers');
    const hasProviders = exists(providers);
    // A state still on its way goes through a pipe, so terraform plan can start meanwhile;
    // only when no terraform init has to run first (init gets the state as a file). Making
    // the pipe is a process of its own: started at once, beside the copy, when the caller
    // is still reading (contents to come), and moved into place once the tree is there.
    const piping = (
      contents instanceof Promise || contents.state instanceof Promise
        ? initialised.then((yes) => (yes ? layPipes(base) : null))
        : Promise.resolve(null)
    ).then(async (pipes) => {
      const r = await ready;
      if (pipes !== null && 'spec' in r && r.spec.state instanceof Promise) return pipes;
      closePipes(pipes); // the state came with the contents: a file (the pipes go with the directory)
      return null;
    });
    piping.catch(() => undefined); // awaited below
    try {
      const outside = await outsideModuleDirs(configDir);
      const top = outside.length > 0 ? commonAncestor([configDir, ...outside]) : configDir;
      const dir = path.join(base, 'tree', path.relative(top, configDir));
      const userModules = path.join(configDir, '.terraform', 'modules');
      // The copies are independent: side by side, into a directory that exists.
      await fs.mkdir(dir, { recursive: true });
      await Promise.all([
        copyTree(configDir, dir, true),
        ...outside.map((m) => copyTree(m, path.join(base, 'tree', path.relative(top, m)), false)),
        exists(userModules).then((has) =>
          has ? copyDir(userModules, path.join(dir, '.terraform', 'modules')) : undefined,
        ),
      ]);
      const settled = await ready;
      if ('error' in settled) throw settled.error;
      const { spec } = settled;
      const stateText = Promise.resolve(spec.state).then((s) => stringifyJson(s, 2) + '\n');
      stateText.catch(() => undefined); // awaited below, or by plan() through the pipe
      const variables =
        spec.variables && Object.keys(spec.variables).length > 0
          ? [{ name: PINNED_VARIABLES, text: stringifyJson(spec.variables, 2) + '\n' }]
          : [];
      // From here to terraform's start, a few small files and links: written with direct
      // calls, each a few microseconds, where an asynchronous one waited its turn on the
      // thread pool and then on the main thread (busy with the scope's exchange).
      for (const f of [...spec.rootFiles, ...variables]) {
        fsSync.writeFileSync(path.join(dir, f.name), f.text);
      }
      const linked = await hasProviders;
      const pluginDir = !process.env.TF_PLUGIN_CACHE_DIR && linked ? providers : null;
      if ((await initialised) && linked) {
        fsSync.mkdirSync(path.join(dir, '.terraform'), { recursive: true });
        fsSync.symlinkSync(providers, path.join(dir, '.terraform', 'providers'), 'dir');
      }
      const pipes = await piping;
      if (pipes === null) await fs.writeFile(path.join(dir, STATE_FILE), await stateText);
      else fsSync.renameSync(path.join(base, STATE_PIPE), path.join(dir, STATE_FILE));
      const early = pipes === null ? null : { ...pipes, text: stateText };
      return new TempWorkspace(base, dir, pluginDir, await initialised, early);
    } catch (e) {
      await piping.then(closePipes).catch(() => undefined);
      await fs.rm(base, { recursive: true, force: true });
      throw e;
    }
  }
}

/** Copies a directory; at the root module, its configuration files and local state stay behind. */
function copyTree(from: string, to: string, rootModule: boolean): Promise<void> {
  return copyDir(from, to, (name, depth) => {
    if (SKIPPED.has(name)) return false;
    if (depth > 0 || !rootModule) return true;
    if (name.endsWith('.tf') || name.endsWith('.tf.json')) return false;
    return !name.startsWith('terraform.tfstate') && !name.endsWith('.tfplan');
  });
}

/**
 * Copies files (with their modes) and symbolic links (as they are) under
 * `from` whose names `keep` accepts, every entry of a directory side by
 * side: a configuration is a few small files, and `fs.cp`'s walk (a
 * check of every destination and its parents, one entry after the other)
 * took 5–25 ms for a dozen of them, on the way to terraform's start.
 * Anything else (a socket, a named pipe) is not configuration and is left.
 */
async function copyDir(
  from: string,
  to: string,
  keep: (name: string, depth: number) => boolean = () => true,
  depth = 0,
): Promise<void> {
  const entries = await fs.readdir(from, { withFileTypes: true });
  await fs.mkdir(to, { recursive: true });
  await Promise.all(
    entries
      .filter((e) => keep(e.name, depth))
      .map(async (e) => {
        const [src, dest] = [path.join(from, e.name), path.join(to, e.name)];
        if (e.isDirectory()) await copyDir(src, dest, keep, depth + 1);
        else if (e.isSymbolicLink()) await fs.symlink(await fs.readlink(src), dest);
        else if (e.isFile()) await fs.copyFile(src, dest);
      }),
  );
}

class TempWorkspace implements TerraformWorkspace {
  /** init() found the user's initialisation reusable: the next plan tries it first. */
  private reusing = false;
  initialisations = 0;

  constructor(
    private readonly base: string,
    readonly dir: string,
    private readonly pluginDir: string | null,
    private readonly reusable: boolean,
    /** The state still on its way, and the pipes terraform plan and show read from. */
    private early: (EarlyPipes & { text: Promise<string> }) | null,
  ) {}

  private async run(
    command: string,
    args: string[],
    signal?: AbortSignal,
    onLine?: (line: string) => void,
  ): Promise<TerraformRun> {
    return this.check(
      command,
      await runTerraform([command, ...args], { cwd: this.dir, signal, onLine }),
    );
  }

  /**
   * `terraform plan` started before its state is there: terraform reads it
   * from the pipe when kl writes it. If the state fails to arrive, or the
   * signal aborts before it has, terraform has nothing to stop gracefully
   * and is killed. Afterwards the pipe is replaced by the state as a file,
   * for whatever runs next in the directory (a plan again, an apply).
   */
  private async planFed(
    early: { state: StatePipe; text: Promise<string> },
    args: string[],
    signal?: AbortSignal,
  ): Promise<TerraformRun> {
    const [file, next] = [path.join(this.dir, STATE_FILE), path.join(this.base, 'state.next')];
    const kill = new AbortController();
    const state: { fed: boolean; failed?: { error: unknown } } = { fed: false };
    let exited = false;
    const onAbort = () => {
      if (!state.fed) kill.abort();
    };
    if (signal?.aborted) onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const running = runTerraform(['plan', ...args], {
        cwd: this.dir,
        signal,
        kill: kill.signal,
      }).finally(() => (exited = true));
      const feeding = early.text.then(
        async (text) => {
          state.fed = true;
          // The file that replaces the pipe is written meanwhile, off the way to terraform show.
          await Promise.all([early.state.feed(text, () => exited), fs.writeFile(next, text)]);
          return text;
        },
        (error: unknown) => {
          state.failed = { error };
          kill.abort();
          return null;
        },
      );
      const run = await running;
      early.state.close();
      if (state.failed) throw state.failed.error;
      // Killed before its state came (the signal): interrupted; the state is not waited for.
      if (kill.signal.aborted) return this.check('plan', run);
      if ((await feeding) === null) throw state.failed!.error;
      fsSync.renameSync(next, file); // on the way to terraform show: no thread-pool turn
      return this.check('plan', run);
    } finally {
      early.state.close();
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /**
   * `terraform show` started now, beside the plan, and held at its CLI
   * configuration (a pipe, see CliConfigPipe) until the plan file is there:
   * its start-up, most of its time, runs meanwhile. Reads nothing in the
   * directory before its release. `release()` answers its run, or null if it
   * could not be handed its configuration (then it is gone, and the caller
   * runs show the usual way); `stop()` ends one never released.
   */
  private heldShow(held: { pipe: CliConfigPipe; config: string }): {
    release(): Promise<TerraformRun | null>;
    stop(): Promise<void>;
  } {
    const kill = new AbortController();
    let exited = false;
    const running = runTerraform(['show', ...SHOW_ARGS], {
      cwd: this.dir,
      kill: kill.signal,
      env: { TF_CLI_CONFIG_FILE: held.pipe.file },
    }).finally(() => (exited = true));
    return {
      release: async () => {
        if (await held.pipe.release(held.config, () => exited)) return running;
        kill.abort();
        await running;
        return null;
      },
      stop: async () => {
        kill.abort(); // a no-op once it has exited
        held.pipe.close();
        await running;
      },
    };
  }

  private check(command: string, run: TerraformRun): TerraformRun {
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
    this.initialisations++;
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
    const early = this.early;
    this.early = null;
    let show: ReturnType<TempWorkspace['heldShow']> | null = null;
    let shown: TerraformRun;
    try {
      try {
        // planFed spawns terraform plan before its first await: the show is spawned after it.
        const planning = early ? this.planFed(early, args, signal) : this.run('plan', args, signal);
        show = early?.show ? this.heldShow(early.show) : null;
        await planning;
      } catch (e) {
        // Whatever terraform found wrong with the reused initialisation, a fresh init decides.
        if (!this.reusing || !(e instanceof DomainError) || e.code !== TERRAFORM_FAILED) throw e;
        await this.freshInit(signal);
        await this.run('plan', args, signal);
      }
      const released = await show?.release();
      shown = released ? this.check('show', released) : await this.run('show', SHOW_ARGS, signal);
    } finally {
      await show?.stop();
    }
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
    // Direct calls: kl's directory is small, and removed while kl is finishing its answer,
    // when the asynchronous walk (a thread-pool turn per entry and level, each waiting for
    // the busy main thread) took longer than that answer and held up kl's exit.
    fsSync.rmSync(this.base, { recursive: true, force: true });
  }
}
